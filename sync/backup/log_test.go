package backup

import (
	"context"
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
