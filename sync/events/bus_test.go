package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// t0 is the synthetic clock's origin.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// publishN publishes n FolderSummary events for folders "f1".."fn".
func publishN(b *Bus, n int) {
	for i := 1; i <= n; i++ {
		b.Publish(FolderSummary{Folder: fmt.Sprintf("f%d", i)})
	}
}

// ids returns the events' IDs.
func ids(evs []Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// checkRun fails unless evs are the consecutive IDs from first to last.
func checkRun(t *testing.T, evs []Event, first, last int64) {
	t.Helper()
	if int64(len(evs)) != last-first+1 {
		t.Fatalf("got IDs %v, want %d to %d", ids(evs), first, last)
	}
	for i, e := range evs {
		if e.ID != first+int64(i) {
			t.Fatalf("got IDs %v, want %d to %d", ids(evs), first, last)
		}
	}
}

func TestPublishSince(t *testing.T) {
	b := newBus(10, fixedClock(t0))
	start := b.Latest()
	if start != t0.UnixMicro() {
		t.Fatalf("the first ID follows %d, want the clock's %d", start, t0.UnixMicro())
	}
	b.Publish(FolderStateChanged{Folder: "docs", From: StateIdle, State: StateScanning})
	b.Publish(ItemFinished{Folder: "docs", Name: "a.txt", Action: ActionDelete, Error: "busy"})
	evs, err := b.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, evs, start+1, start+2)
	if b.Latest() != start+2 {
		t.Errorf("Latest is %d, want %d", b.Latest(), start+2)
	}
	want := []Event{
		{ID: start + 1, Time: t0, Type: TypeFolderStateChanged, Data: FolderStateChanged{Folder: "docs", From: StateIdle, State: StateScanning}},
		{ID: start + 2, Time: t0, Type: TypeItemFinished, Data: ItemFinished{Folder: "docs", Name: "a.txt", Action: ActionDelete, Error: "busy"}},
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d is %+v, want %+v", i, evs[i], want[i])
		}
	}
	// The reader's copy is its own.
	evs[0].Type = "changed"
	if again, _ := b.Since(start); again[0].Type != TypeFolderStateChanged {
		t.Error("changing Since's answer changed the bus")
	}
	if evs, err := b.Since(start + 2); err != nil || len(evs) != 0 {
		t.Errorf("Since(latest) = %v, %v; want nothing", ids(evs), err)
	}
	b.Publish(nil)
	if b.Latest() != start+2 {
		t.Error("a nil payload was published")
	}
}

// TestSinceRingBoundaries asks a ring of 4 for the events after IDs that
// leave 3, 4 and 5 events to return: 5 is one more than it holds.
func TestSinceRingBoundaries(t *testing.T) {
	const size = 4
	b := newBus(size, fixedClock(t0))
	start := b.Latest()
	publishN(b, 10)
	last := b.Latest()
	for _, c := range []struct {
		after  int64
		behind bool
	}{
		{last - size + 1, false}, // n-1 events
		{last - size, false},     // n
		{last - size - 1, true},  // n+1: the oldest of them is gone
		{start, true},
		{last + 1, true}, // an ID this bus never gave
	} {
		evs, err := b.Since(c.after)
		if c.behind {
			if !errors.Is(err, ErrFellBehind) {
				t.Errorf("Since(last%+d) = %v, %v; want ErrFellBehind", c.after-last, ids(evs), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Since(last%+d): %v", c.after-last, err)
		}
		checkRun(t, evs, c.after+1, last)
	}
	evs, err := b.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, evs, last-size+1, last)
	if d := evs[0].Data.(FolderSummary); d.Folder != "f7" {
		t.Errorf("the oldest held is %q's, want f7's", d.Folder)
	}
}

// TestEarlierRunFellBehind: a reader's ID from a bus of an earlier run is
// not taken for one of the new bus's, whether the new one has published
// fewer events than the old one or none.
func TestEarlierRunFellBehind(t *testing.T) {
	old := newBus(10, fixedClock(t0))
	publishN(old, 5)
	cursor := old.Latest()
	b := newBus(10, fixedClock(t0.Add(time.Second)))
	if _, err := b.Since(cursor); !errors.Is(err, ErrFellBehind) {
		t.Errorf("a new bus answers an old ID with %v, want ErrFellBehind", err)
	}
	if err := b.Wait(context.Background(), cursor); err != nil {
		t.Errorf("Wait for an old ID: %v, want nil at once", err)
	}
	b.Publish(FolderSummary{Folder: "docs"})
	if _, err := b.Since(cursor); !errors.Is(err, ErrFellBehind) {
		t.Errorf("a new bus answers an old ID with %v, want ErrFellBehind", err)
	}
	if evs, err := b.Since(0); err != nil || len(evs) != 1 || evs[0].ID <= cursor {
		t.Errorf("Since(0) = %v, %v; want one event with an ID above %d", ids(evs), err, cursor)
	}
}

func TestNilBus(t *testing.T) {
	var b *Bus
	b.Publish(FolderSummary{Folder: "docs"})
	if evs, err := b.Since(0); err != nil || evs != nil {
		t.Errorf("nil bus: Since = %v, %v", evs, err)
	}
	if b.Latest() != 0 {
		t.Errorf("nil bus: Latest = %d", b.Latest())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("nil bus: Wait = %v, want context.Canceled", err)
	}
}

func TestNewBusDefaultSize(t *testing.T) {
	b := NewBus(0)
	publishN(b, DefaultSize+1)
	evs, err := b.Since(0)
	if err != nil || len(evs) != DefaultSize {
		t.Fatalf("a default bus holds %d events (%v), want %d", len(evs), err, DefaultSize)
	}
	if now := time.Now().UnixMicro(); evs[0].ID > now || evs[0].ID < now-int64(time.Hour/time.Microsecond) {
		t.Errorf("IDs start near %d, want near the clock's %d", evs[0].ID, now)
	}
}

func TestWait(t *testing.T) {
	b := newBus(4, fixedClock(t0))
	start := b.Latest()
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	// Nothing to say: it waits for its context.
	if err := b.Wait(short(), start); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with no news = %v, want DeadlineExceeded", err)
	}
	if err := b.Wait(short(), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(0) on an empty bus = %v, want DeadlineExceeded", err)
	}
	// A publish wakes every waiter.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		wg.Go(func() { errs <- b.Wait(ctx, start) })
	}
	b.Publish(FolderSummary{Folder: "docs"})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a waiter woke with %v", err)
		}
	}
	// News already there: at once, even with an ended context.
	done, stop := context.WithCancel(context.Background())
	stop()
	for _, after := range []int64{start, 0} {
		if err := b.Wait(done, after); err != nil {
			t.Errorf("Wait(%d) with an event after it = %v, want nil", after, err)
		}
	}
	publishN(b, 10)
	if err := b.Wait(done, start); err != nil {
		t.Errorf("Wait for a reader that fell behind = %v, want nil", err)
	}
}

// reader follows b from after until it has seen the ID end, as a console
// would: on ErrFellBehind it resyncs from Latest. It returns the events it
// saw and how often it resynced, failing the test on any gap it was not
// told of.
func reader(t *testing.T, b *Bus, after, end int64) (seen []Event, resyncs int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for after < end {
		if err := b.Wait(ctx, after); err != nil {
			t.Errorf("reader at %d: %v", after, err)
			return seen, resyncs
		}
		evs, err := b.Since(after)
		if errors.Is(err, ErrFellBehind) {
			resyncs++
			after = b.Latest()
			continue
		} else if err != nil {
			t.Errorf("reader at %d: %v", after, err)
			return seen, resyncs
		}
		for _, e := range evs {
			if e.ID != after+1 {
				t.Errorf("reader at %d got %d: a silent gap", after, e.ID)
			}
			after = e.ID
		}
		seen = append(seen, evs...)
	}
	return seen, resyncs
}

// TestConcurrent runs publishers and readers together (for -race). With a
// ring larger than all that is published every reader sees every event,
// each publisher's in its order; with a small one readers may fall behind
// but are told each time.
func TestConcurrent(t *testing.T) {
	const publishers, each, readers = 4, 500, 4
	for _, size := range []int{publishers * each, 16} {
		t.Run(fmt.Sprint("size ", size), func(t *testing.T) {
			b := NewBus(size)
			start := b.Latest()
			end := start + publishers*each
			var wg sync.WaitGroup
			results := make([][]Event, readers)
			resyncs := make([]int, readers)
			for r := range readers {
				wg.Go(func() { results[r], resyncs[r] = reader(t, b, start, end) })
			}
			for p := range publishers {
				wg.Go(func() {
					for i := range each {
						b.Publish(ItemFinished{Folder: fmt.Sprint(p), Name: fmt.Sprint(i)})
					}
				})
			}
			wg.Wait()
			if size < publishers*each {
				return // the reader checked there was no silent gap
			}
			for r, seen := range results {
				if resyncs[r] != 0 || len(seen) != publishers*each {
					t.Fatalf("reader %d saw %d events and resynced %d times, want all %d and none", r, len(seen), resyncs[r], publishers*each)
				}
				next := map[string]int{}
				for _, e := range seen {
					d := e.Data.(ItemFinished)
					if d.Name != fmt.Sprint(next[d.Folder]) {
						t.Fatalf("reader %d: publisher %s's event %s came after %d", r, d.Folder, d.Name, next[d.Folder])
					}
					next[d.Folder]++
				}
			}
		})
	}
}

// TestPublishNeverWaitsForReaders publishes many times the ring's size
// while readers wait and none reads.
func TestPublishNeverWaitsForReaders(t *testing.T) {
	b := newBus(8, fixedClock(t0))
	start := b.Latest()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			// Wakes at the first publish, then waits at an ID that stays
			// behind: a reader that stopped reading.
			b.Wait(ctx, start)
			b.Wait(ctx, start)
		})
	}
	publishN(b, 1000)
	if b.Latest() != start+1000 {
		t.Errorf("Latest = %d after 1000 publishes, want %d", b.Latest(), start+1000)
	}
	cancel()
	wg.Wait()
}
