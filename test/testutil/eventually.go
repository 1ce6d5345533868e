package testutil

import (
	"testing"
	"time"
)

// maxPause bounds the pause between two polls: a condition that turns true
// is seen within this long, however long the wait has run already.
const maxPause = 20 * time.Millisecond

// Eventually polls cond until it returns true and fails the test if it has
// not within timeout. The failure names what was awaited (what, as in
// "timed out after 10s waiting for " + what) and how long the wait ran.
//
// cond is called at least once, from the caller's goroutine; it is called
// again after pauses that start at a millisecond and double up to 20 ms, so
// a quick condition costs little time and a slow one few calls. Like
// t.Fatal, Eventually must be called from the goroutine running the test.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	pause := time.Millisecond
	for !cond() {
		now := time.Now()
		if !now.Before(deadline) {
			t.Fatalf("timed out after %v waiting for %s", now.Sub(start).Round(time.Millisecond), what)
		}
		time.Sleep(min(pause, deadline.Sub(now)))
		pause = min(2*pause, maxPause)
	}
}
