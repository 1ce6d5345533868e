package backup

import (
	"context"
	"strings"
	"testing"

	"lockstep/sync/index"
)

// TestReceiverLogArrivingFirst: the same for a receiver's log: records
// and cursors that arrived before its log ID was first recorded stay; a
// log that started over drops them.
func TestReceiverLogArrivingFirst(t *testing.T) {
	n := startForkNode(t)
	ctx := context.Background()
	rec := index.Record{Name: "x", Type: index.File, Size: 1, Version: index.Vector{{ID: n.trusted.Short(), Value: 1}}, Sequence: 3}
	if err := n.f.Index().UpdateRemote(ctx, n.receiver, []index.Record{rec}); err != nil {
		t.Fatal(err)
	}
	n.setCursor(t, 3)
	if err := n.db.SetReceiverHeld(ctx, "f", n.receiver.String(), 2, 3); err != nil {
		t.Fatal(err)
	}

	if err := n.b.noteReceiverLog(ctx, n.f, n.receiver, 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.f.Index().Remote(n.receiver, "x"); !ok {
		t.Fatal("the first log ID recorded dropped the records that came with it")
	}
	if got := n.b.view(ctx, "f", n.receiver).Cursor; got != 3 {
		t.Fatalf("cursor = %d after the first log ID, want 3", got)
	}
	if got := n.b.logID(ctx, "f", n.receiver); got != 5 {
		t.Fatalf("log ID = %d, want 5", got)
	}

	if err := n.b.noteReceiverLog(ctx, n.f, n.receiver, 5, 6); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.f.Index().Remote(n.receiver, "x"); ok {
		t.Fatal("a log that started over kept the old log's records")
	}
	if got := n.b.view(ctx, "f", n.receiver).Cursor + n.b.view(ctx, "f", n.receiver).Held; got != 0 {
		t.Fatalf("cursors of the old log kept: %d", got)
	}
}

// TestClaimNotBelieved: a receiver's claim to hold more of this device's
// records than its index has renumbers the index only once the receiver
// served them back; a claim it does not show (2^63-101, say) is reported
// and leaves the index as it was (a renumber past it ended every later
// scan in "negative sequence").
func TestClaimNotBelieved(t *testing.T) {
	n := startForkNode(t)
	ctx := context.Background()
	before := n.f.Index().LocalSequence()
	if got := n.b.verifyClaim(ctx, n.f, n.receiver, 1<<63-101, 0); got != 0 {
		t.Fatalf("upload starts after %d for a claim never shown", got)
	}
	if got := n.f.Index().LocalSequence(); got != before {
		t.Fatalf("local sequence %d after a false claim, was %d", got, before)
	}
	if e := n.receiverErr(t); !strings.Contains(e, "claims to hold") {
		t.Fatalf("false claim not reported: %q", e)
	}
	// Served back (an earlier database of this device): renumbered.
	claim := before + 5
	if err := n.db.SetReceiverHeld(ctx, "f", n.receiver.String(), claim, 9); err != nil {
		t.Fatal(err)
	}
	if got := n.b.verifyClaim(ctx, n.f, n.receiver, claim, 100); got != claim {
		t.Fatalf("upload starts after %d, want %d", got, claim)
	}
	if got := n.f.Index().LocalSequence(); got < claim {
		t.Fatalf("local sequence %d after a shown claim of %d", got, claim)
	}
}
