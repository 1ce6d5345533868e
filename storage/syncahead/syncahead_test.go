package syncahead

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestOneBarrierAtATime: one barrier per Every bytes noted, none before,
// and never two at once, from many writers.
func TestOneBarrierAtATime(t *testing.T) {
	var calls, running, overlaps atomic.Int64
	release := make(chan struct{})
	f := New(func() error {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		calls.Add(1)
		<-release
		running.Add(-1)
		return nil
	})
	f.Wrote(Every - 1)
	if calls.Load() != 0 {
		t.Fatal("a barrier before Every bytes")
	}
	f.Wrote(1)
	// The first barrier is blocked: what is noted meanwhile starts none.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 16 {
				f.Wrote(Every / 8)
			}
		})
	}
	wg.Wait()
	close(release)
	f.Wait()
	if calls.Load() != 1 || overlaps.Load() != 0 {
		t.Fatalf("%d barriers, %d overlapping; want 1 while the first ran", calls.Load(), overlaps.Load())
	}
	// Once it ended, the bytes noted meanwhile start the next.
	f.Wrote(1)
	f.Wait()
	if calls.Load() != 2 {
		t.Fatalf("%d barriers, want a second one", calls.Load())
	}
}

// TestBarrierErrorIsIgnored: a failed barrier leaves the Flusher working.
func TestBarrierErrorIsIgnored(t *testing.T) {
	var calls atomic.Int64
	f := New(func() error { calls.Add(1); return errors.New("disk on fire") })
	for range 3 {
		f.Wrote(Every)
		f.Wait()
	}
	if calls.Load() != 3 {
		t.Fatalf("%d barriers, want 3", calls.Load())
	}
}

func TestNilFlusher(t *testing.T) {
	var f *Flusher
	f.Wrote(Every)
	f.Wait()
}
