//go:build race

package chunk

// raceEnabled is true under the race detector, which slows the Rabin loop
// about tenfold; the 1 GiB shift test has no concurrency for it to check.
const raceEnabled = true
