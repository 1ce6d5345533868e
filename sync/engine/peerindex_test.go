package engine

import (
	"context"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/index"
)

// TestPeerIndexArrivingFirst: a peer's index can arrive before the first
// reconcile that names its incarnation (it answers our ClusterConfig at
// once). Recording that incarnation must keep those records — dropping
// them left two devices stuck, one needing a file no peer was known to
// have — while a later, different incarnation drops the old records.
func TestPeerIndexArrivingFirst(t *testing.T) {
	ctx := context.Background()
	peer := crypt.DeviceID{1}
	e := startEngine(t, t.TempDir(), db.Device{ID: peer.String()})
	f := e.folder("f")

	seed := index.Record{Name: "seed", Type: index.File, Size: 1, Version: index.Vector{{ID: peer.Short(), Value: 1}}, Sequence: 1}
	if err := f.set.UpdateRemote(ctx, peer, []index.Record{seed}); err != nil {
		t.Fatal(err)
	}
	if err := f.notePeerIndex(ctx, peer, 7); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.set.Remote(peer, "seed"); !ok {
		t.Fatal("the first incarnation recorded dropped the records that came with it")
	}
	if got := e.peerIndexID(ctx, "f", peer); got != 7 {
		t.Fatalf("peer index ID = %d, want 7", got)
	}
	if err := f.notePeerIndex(ctx, peer, 7); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.set.Remote(peer, "seed"); !ok {
		t.Fatal("the same incarnation again dropped the records")
	}
	if err := f.notePeerIndex(ctx, peer, 8); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.set.Remote(peer, "seed"); ok {
		t.Fatal("a new incarnation kept the old one's records")
	}
}

// TestReceiverLogArrivingFirst: the same for a receiver's log: records
// and cursors that arrived before its log ID was first recorded stay; a
// log that started over drops them.
func TestReceiverLogArrivingFirst(t *testing.T) {
	n := startForkNode(t)
	ctx := context.Background()
	rec := index.Record{Name: "x", Type: index.File, Size: 1, Version: index.Vector{{ID: n.trusted.Short(), Value: 1}}, Sequence: 3}
	if err := n.f.set.UpdateRemote(ctx, n.receiver, []index.Record{rec}); err != nil {
		t.Fatal(err)
	}
	n.set(t, logCursorSetting("f", n.receiver), 3)
	n.set(t, heldSetting("f", n.receiver), 2)

	if err := n.f.noteReceiverLog(ctx, n.receiver, 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.f.set.Remote(n.receiver, "x"); !ok {
		t.Fatal("the first log ID recorded dropped the records that came with it")
	}
	if got := n.e.settingInt(ctx, logCursorSetting("f", n.receiver)); got != 3 {
		t.Fatalf("cursor = %d after the first log ID, want 3", got)
	}
	if got := n.e.peerIndexID(ctx, "f", n.receiver); got != 5 {
		t.Fatalf("log ID = %d, want 5", got)
	}

	if err := n.f.noteReceiverLog(ctx, n.receiver, 5, 6); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.f.set.Remote(n.receiver, "x"); ok {
		t.Fatal("a log that started over kept the old log's records")
	}
	if got := n.e.settingInt(ctx, logCursorSetting("f", n.receiver)) + n.e.settingInt(ctx, heldSetting("f", n.receiver)); got != 0 {
		t.Fatalf("cursors of the old log kept: %d", got)
	}
}
