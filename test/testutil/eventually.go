package testutil

import (
	"testing"
	"time"
)

// maxPause bounds the pause between two polls of a cheap condition: one
// that turns true is seen within this long, however long the wait has run.
// It is also the end-to-end tests' old polling interval, so a node's status
// is asked for no more often than before.
const maxPause = 50 * time.Millisecond

// Eventually polls cond until it returns true and fails the test if it has
// not within timeout. The failure names what was awaited (what, as in
// "timed out after 10s waiting for " + what) and how long the wait ran.
//
// cond is called at least once, always from the caller's goroutine. The
// pauses between calls start at a millisecond and double up to 50 ms, so
// a quick wait costs little time and a long one few calls; a pause is never
// shorter than the call before it took, so polling a costly condition (a
// walk of a tree, a page load) takes at most about half of the wait. Like
// t.Fatal, Eventually must be called from the goroutine running the test.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	step := time.Millisecond
	for {
		called := time.Now()
		if cond() {
			return
		}
		now := time.Now()
		if !now.Before(deadline) {
			t.Fatalf("timed out after %v waiting for %s", now.Sub(start).Round(time.Millisecond), what)
		}
		time.Sleep(min(max(step, now.Sub(called)), deadline.Sub(now)))
		step = min(2*step, maxPause)
	}
}
