package engine

import (
	"context"
	"path/filepath"
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

// TestStartedFolderKnowsItsShares: a folder is visible to peers' messages
// only with its shares loaded. A cluster config handled in between took
// the folder for an offer and left it silent on that connection until a
// restart (seen on 2-3% of restarts).
func TestStartedFolderKnowsItsShares(t *testing.T) {
	peer := crypt.DeviceID{1}
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	if err := d.PutFolder(ctx, db.Folder{ID: "f", Path: t.TempDir(), Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	if err := d.PutDevice(ctx, db.Device{ID: peer.String()}); err != nil {
		t.Fatal(err)
	}
	if err := d.ShareFolder(ctx, "f", peer.String()); err != nil {
		t.Fatal(err)
	}
	e := newWired(crypt.DeviceID{9}, d)
	seen := make(chan bool, 1)
	e.started = func(id string) {
		shared, _ := e.Shares(id, peer)
		seen <- shared
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Serve(sctx) }()
	defer func() { cancel(); <-done }()
	if !<-seen {
		t.Fatal("the folder was visible before its shares were loaded")
	}
}
