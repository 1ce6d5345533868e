package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fatalTB records a Fatalf and ends the calling goroutine, as testing.T's
// does, so Eventually's failure can be examined without failing this test.
type fatalTB struct {
	testing.TB
	msg string
}

func (*fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// eventually runs Eventually on its own goroutine, since a failure ends
// that goroutine, and returns the failure message ("" if it passed).
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(f, timeout, what, cond)
	}()
	<-done
	return f.msg
}

func TestEventuallyTrueAtOnce(t *testing.T) {
	calls := 0
	start := time.Now()
	if msg := eventually(t, time.Second, "nothing", func() bool { calls++; return true }); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if calls != 1 {
		t.Errorf("cond called %d times, want 1", calls)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("a true condition took %v", d)
	}
}

func TestEventuallyWaitsForCondition(t *testing.T) {
	var flipped atomic.Bool
	time.AfterFunc(50*time.Millisecond, func() { flipped.Store(true) })
	calls := 0
	if msg := eventually(t, 10*time.Second, "the flip", func() bool { calls++; return flipped.Load() }); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	// Pauses double from 1 ms: 50 ms is some 6 polls, not 50.
	if calls < 2 || calls > 20 {
		t.Errorf("cond called %d times in about 50 ms", calls)
	}
}

func TestEventuallyFailsWithWhatAndHowLong(t *testing.T) {
	const timeout = 100 * time.Millisecond
	start := time.Now()
	msg := eventually(t, timeout, "the answer", func() bool { return false })
	waited := time.Since(start)
	if !strings.HasPrefix(msg, "timed out after ") || !strings.HasSuffix(msg, " waiting for the answer") {
		t.Fatalf("failure message %q", msg)
	}
	d, err := time.ParseDuration(strings.TrimSuffix(strings.TrimPrefix(msg, "timed out after "), " waiting for the answer"))
	if err != nil {
		t.Fatalf("failure message %q: %v", msg, err)
	}
	// The message rounds to the millisecond.
	if d < timeout || d > waited+time.Millisecond/2 {
		t.Errorf("message says it waited %v; the timeout was %v and it returned after %v", d, timeout, waited)
	}
	// The last pause is cut short at the deadline, not slept in full.
	if waited > timeout+maxPause+50*time.Millisecond {
		t.Errorf("a %v wait returned after %v", timeout, waited)
	}
}

// TestEventuallyChecksOnceWithoutTime: a zero timeout still asks cond once,
// so a condition already true never fails.
func TestEventuallyChecksOnceWithoutTime(t *testing.T) {
	if msg := eventually(t, 0, "a true thing", func() bool { return true }); msg != "" {
		t.Errorf("a true condition failed: %s", msg)
	}
	calls := 0
	if msg := eventually(t, 0, "a false thing", func() bool { calls++; return false }); msg == "" || calls != 1 {
		t.Errorf("a false condition: %d calls, failure %q", calls, msg)
	}
}

// TestEventuallyPausesAsLongAsCondTakes: a condition taking 100 ms is polled
// at most every 200 ms; with pauses of 50 ms at most, a second would see 9
// calls.
func TestEventuallyPausesAsLongAsCondTakes(t *testing.T) {
	calls := 0
	msg := eventually(t, time.Second, "a slow condition", func() bool {
		calls++
		time.Sleep(100 * time.Millisecond)
		return false
	})
	if msg == "" {
		t.Fatal("a false condition passed")
	}
	if calls < 2 || calls > 6 {
		t.Errorf("a 100 ms condition was called %d times in a second, want 2 to 6", calls)
	}
}
