package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/restic/chunker"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/events"
	"lockstep/sync/index"
	"lockstep/sync/router"
	"lockstep/test/testutil"
)

// startEngine runs an engine (device ID 9) over a fresh SQLite database
// with folder "f" at dir shared with devs, until the test ends. It returns
// once the folder runs and knows its shares.
func startEngine(t *testing.T, dir string, devs ...db.Device) *Engine {
	t.Helper()
	return startEngineWith(t, crypt.DeviceID{9}, 0, dir, devs...)
}

// startEngineWith is startEngine for device id, with the folder's
// chunking polynomial set to pol (unless 0) before it starts.
func startEngineWith(t *testing.T, id crypt.DeviceID, pol chunker.Pol, dir string, devs ...db.Device) *Engine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.PutFolder(ctx, db.Folder{ID: "f", Path: dir, Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	if pol != 0 {
		if err := d.SetPolynomial(ctx, "f", uint64(pol)); err != nil {
			t.Fatal(err)
		}
	}
	for _, dev := range devs {
		if err := d.PutDevice(ctx, dev); err != nil {
			t.Fatal(err)
		}
		if err := d.ShareFolder(ctx, "f", dev.ID); err != nil {
			t.Fatal(err)
		}
	}
	e := newWired(id, d)
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	ready := func() bool {
		f := e.folder("f")
		if f == nil {
			return false
		}
		for _, dev := range devs {
			id, _ := crypt.ParseDeviceID(dev.ID)
			if !f.sharedWith(id) || f.untrusted(id) != dev.Untrusted {
				return false
			}
		}
		return true
	}
	testutil.Eventually(t, 10*time.Second, "the folder to start", ready)
	return e
}

func sampleRecord() index.Record {
	data := []byte("hello world")
	return index.Record{
		Name: "dir/ünï file.txt", Type: index.File, Size: int64(len(data)), Mode: 0o640,
		ModTime: 1700000000123456789, Version: index.Vector{{ID: 3, Value: 7}, {ID: 9, Value: 1}},
		Blocks:   []index.Block{{Offset: 0, Size: uint32(len(data)), Hash: chunk.HashOf(data)}},
		Sequence: 42, ModifiedBy: 9,
	}
}

func testKeys(t *testing.T, b byte) *crypt.Keys {
	t.Helper()
	k, err := crypt.DeriveKeys(crypt.FolderKey{b})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// routers holds each test engine's router, for connect.
var routers sync.Map // *Engine -> *router.Router

// newWired returns an engine wired as a node wires it: a router in front
// and backup beside it.
func newWired(id crypt.DeviceID, d *db.DB) *Engine {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := router.New(id, d, log, nil)
	e := New(id, d, log, Options{Net: r, Events: events.NewBus(0)})
	b := backup.New(id, d, log, testFolders{e}, r, backup.Options{})
	e.SetSealed(b)
	r.Handle(e, b, nil)
	routers.Store(e, r)
	return e
}

// testFolders hands the engine's folders to backup, as cmd does.
type testFolders struct{ *Engine }

func (e testFolders) Folder(id string) backup.Folder {
	if h, ok := e.Engine.Folder(id); ok {
		return h
	}
	return nil
}

func (e testFolders) Each(fn func(backup.Folder)) { e.EachFolder(func(h Folder) { fn(h) }) }
