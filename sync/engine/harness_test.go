package engine

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
	"lockstep/sync/index"
)

// startEngine runs an engine (device ID 9) over a fresh SQLite database
// with folder "f" at dir shared with devs, until the test ends. It returns
// once the folder runs and knows its shares.
func startEngine(t *testing.T, dir string, devs ...db.Device) *Engine {
	t.Helper()
	return startEngineWith(t, crypt.DeviceID{9}, nil, dir, devs...)
}

// startEngineWith is startEngine for device id, with settings stored in
// its database before it starts.
func startEngineWith(t *testing.T, id crypt.DeviceID, settings map[string]string, dir string, devs ...db.Device) *Engine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range settings {
		if err := d.SetSetting(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.PutFolder(ctx, db.Folder{ID: "f", Path: dir, Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	for _, dev := range devs {
		if err := d.PutDevice(ctx, dev); err != nil {
			t.Fatal(err)
		}
		if err := d.ShareFolder(ctx, "f", dev.ID); err != nil {
			t.Fatal(err)
		}
	}
	e := New(id, d, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
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
	deadline := time.Now().Add(10 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			t.Fatal("folder did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
