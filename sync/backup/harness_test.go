package backup

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/engine"
	"lockstep/sync/index"
	"lockstep/sync/router"
	"lockstep/test/testutil"
)

// forkNode is a node (device {9}) wired as cmd wires one, with folder "f"
// at dir shared with a trusted device and a receiver.
type forkNode struct {
	e                 *engine.Engine
	b                 *Backup
	db                *db.DB
	f                 Folder
	dir               string
	id                crypt.DeviceID
	trusted, receiver crypt.DeviceID
}

func startForkNode(t testing.TB) *forkNode {
	t.Helper()
	n := &forkNode{id: crypt.DeviceID{9}, trusted: crypt.DeviceID{1}, receiver: crypt.DeviceID{2}, dir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	n.db = d
	if err := d.PutFolder(ctx, db.Folder{ID: "f", Path: n.dir, Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []db.Device{{ID: n.trusted.String()}, {ID: n.receiver.String(), Untrusted: true}} {
		if err := d.PutDevice(ctx, dev); err != nil {
			t.Fatal(err)
		}
		if err := d.ShareFolder(ctx, "f", dev.ID); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := router.New(n.id, d, log, nil)
	// The watcher waits an hour: the tests write files the index must not
	// take in behind their backs.
	n.e = engine.New(n.id, d, log, engine.Options{Net: r, WatchDelay: time.Hour})
	n.b = New(n.id, d, log, testFolders{n.e}, r, Options{})
	n.e.SetSealed(n.b)
	r.Handle(n.e, n.b, nil)
	done := make(chan error, 1)
	go func() { done <- n.e.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	testutil.Eventually(t, 10*time.Second, "the folder to start", func() bool {
		f := (testFolders{n.e}).Folder("f")
		if f == nil {
			return false
		}
		s1, u1 := f.SharedWith(n.trusted)
		s2, u2 := f.SharedWith(n.receiver)
		n.f = f
		return s1 && !u1 && s2 && u2
	})
	return n
}

// peer is a connection of dev for handler calls that send nothing.
func (n *forkNode) peer(t *testing.T, dev crypt.DeviceID) *router.Peer {
	return router.NewPeer(t.Context(), dev, nil)
}

func (n *forkNode) setCursor(t *testing.T, v int64) {
	t.Helper()
	if err := n.db.SetReceiverCursor(context.Background(), "f", n.receiver.String(), v); err != nil {
		t.Fatal(err)
	}
}

func (n *forkNode) setLogID(t *testing.T, id uint64) {
	t.Helper()
	if err := n.db.SetPeerIndexID(context.Background(), "f", n.receiver.String(), id); err != nil {
		t.Fatal(err)
	}
}

// receiverErr is the status error of the receiver.
func (n *forkNode) receiverErr(t *testing.T) string {
	t.Helper()
	return n.b.Status("f").Receivers[n.receiver].Error
}

// testFolders hands the engine's folders to backup, as cmd does.
type testFolders struct{ *engine.Engine }

func (e testFolders) Folder(id string) Folder {
	if h, ok := e.Engine.Folder(id); ok {
		return h
	}
	return nil
}

func (e testFolders) Each(fn func(Folder)) { e.EachFolder(func(h engine.Folder) { fn(h) }) }

func sampleRecord() index.Record {
	data := []byte("hello world")
	return index.Record{
		Name: "dir/ünï file.txt", Type: index.File, Size: int64(len(data)), Mode: 0o640,
		ModTime: 1700000000123456789, Version: index.Vector{{ID: 3, Value: 7}, {ID: 9, Value: 1}},
		Blocks:   []index.Block{{Offset: 0, Size: uint32(len(data)), Hash: chunk.HashOf(data)}},
		Sequence: 42, ModifiedBy: 9,
	}
}

func testKeys(t testing.TB, b byte) *crypt.Keys {
	t.Helper()
	k, err := crypt.DeriveKeys(crypt.FolderKey{b})
	if err != nil {
		t.Fatal(err)
	}
	return k
}
