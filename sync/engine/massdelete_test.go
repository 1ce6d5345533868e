package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/sync/index"
)

// guardFolder is an idle folder whose index holds n local files f00...;
// deleted(names) is a peer's deletion of them, as its index announces it.
func guardFolder(t *testing.T, n int) (*folder, func(names ...string) []index.Record) {
	t.Helper()
	f := idleFolder(t)
	me := crypt.DeviceID{9}
	var recs []index.Record
	for i := range n {
		recs = append(recs, index.Record{Name: fmt.Sprintf("f%02d", i), Type: index.File, Version: index.Vector{{ID: me.Short(), Value: uint64(i + 1)}}})
	}
	if _, err := f.set.UpdateLocal(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	peer := crypt.DeviceID{1}
	counter := uint64(100)
	deleted := func(names ...string) []index.Record {
		t.Helper()
		var ds []index.Record
		for _, name := range names {
			l, _ := f.set.Local(name)
			counter++
			d := index.Record{Name: name, Type: index.File, Deleted: true, Version: l.Version.Update(peer.Short(), counter)}
			ds = append(ds, d)
		}
		announce(t, f, peer, ds...)
		return f.set.Need()
	}
	return f, deleted
}

func deletions(need []index.Record) int {
	n := 0
	for _, r := range need {
		if r.Deleted {
			n++
		}
	}
	return n
}

// TestMassDeleteStopsBeforeFirst: a peer's deletion of most of the folder
// that arrives in pieces is held while it arrives, and the folder stops
// before deleting any of it. Piece by piece, each piece alone looked
// small and went through (20% of the files were gone before the guard
// stopped).
func TestMassDeleteStopsBeforeFirst(t *testing.T) {
	f, deleted := guardFolder(t, 10)
	t0 := time.Now()
	need, stopped := f.guardMassDelete(deleted("f00", "f01", "f02"), t0)
	if stopped || deletions(need) != 0 {
		t.Fatalf("first piece: stopped %v, %d deletions let through; want them held", stopped, deletions(need))
	}
	need, stopped = f.guardMassDelete(deleted("f03", "f04", "f05"), t0.Add(time.Second))
	if stopped || deletions(need) != 0 {
		t.Fatalf("second piece: stopped %v, %d deletions let through; want them held", stopped, deletions(need))
	}
	if _, stopped = f.guardMassDelete(f.set.Need(), t0.Add(time.Second+deleteQuiet)); !stopped {
		t.Fatal("6 of 10 files deleted: not stopped once the deletions settled")
	}
}

// TestMassDeleteTrickle: deletions that keep coming slowly are judged
// together after deleteHoldMax, not let through one by one (a slow
// deletion of everything never stopped the folder).
func TestMassDeleteTrickle(t *testing.T) {
	f, deleted := guardFolder(t, 10)
	t0 := time.Now()
	var stopped bool
	for i := range 8 {
		at := t0.Add(time.Duration(i) * deleteHoldMax / 8)
		var need []index.Record
		need, stopped = f.guardMassDelete(deleted(fmt.Sprintf("f%02d", i)), at)
		if stopped {
			t.Fatalf("stopped at deletion %d, before the hold ended", i+1)
		}
		if deletions(need) != 0 {
			t.Fatalf("deletion %d let through while deletions kept coming", i+1)
		}
	}
	if _, stopped = f.guardMassDelete(f.set.Need(), t0.Add(deleteHoldMax)); !stopped {
		t.Fatal("8 of 10 files deleted over the hold: not stopped")
	}
}

// TestMassDeleteWindow: deletions applied a while ago count with new
// ones, but not once they are older than massDeleteWindow; a small
// deletion goes through once settled.
func TestMassDeleteWindow(t *testing.T) {
	f, deleted := guardFolder(t, 10)
	t0 := time.Now()
	need, _ := f.guardMassDelete(deleted("f00"), t0)
	if deletions(need) != 0 {
		t.Fatal("a deletion was not held while it could still grow")
	}
	need, stopped := f.guardMassDelete(f.set.Need(), t0.Add(deleteQuiet))
	if stopped || deletions(need) != 1 {
		t.Fatalf("one of 10 files: stopped %v, %d deletions", stopped, deletions(need))
	}
	// Four applied a minute ago; now two more of the six left.
	f.deletions.note(t0.Add(-time.Minute), 4)
	for _, n := range []string{"f00", "f01", "f02", "f03"} {
		l, _ := f.set.Local(n)
		l.Deleted = true
		if _, err := f.set.UpdateLocal(context.Background(), []index.Record{l}); err != nil {
			t.Fatal(err)
		}
	}
	t1 := t0.Add(time.Minute)
	f.guardMassDelete(deleted("f04", "f05"), t1)
	if _, stopped := f.guardMassDelete(f.set.Need(), t1.Add(deleteQuiet)); !stopped {
		t.Fatal("6 of 10 files deleted within the hour: not stopped")
	}
	// The same two, with the four out of the window: not a mass deletion.
	f.allowDeletes()
	f.mu.Lock()
	f.allowMass = false
	f.mu.Unlock()
	f.deletions = deletionHold{}
	f.deletions.note(t0.Add(-2*massDeleteWindow), 4)
	f.guardMassDelete(f.set.Need(), t1)
	if _, stopped := f.guardMassDelete(f.set.Need(), t1.Add(deleteQuiet)); stopped {
		t.Fatal("deletions older than the window counted")
	}
}
