package router_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/engine"
	"lockstep/sync/protocol"
	"lockstep/sync/router"
	"lockstep/test/testutil"
)

// node runs a router over a real engine and backup, with folder "f" at dir
// shared with devs, until the test ends.
func node(t *testing.T, dir string, devs ...db.Device) (*router.Router, *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
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
	id, log := crypt.DeviceID{9}, slog.New(slog.NewTextHandler(io.Discard, nil))
	r := router.New(id, d, log, nil)
	e := engine.New(id, d, log, engine.Options{Net: r})
	b := backup.New(id, d, log, folders{e}, r, backup.Options{})
	e.SetSealed(b)
	r.Handle(e, b, nil)
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	testutil.Eventually(t, 10*time.Second, "the folder to start", func() bool {
		for _, dev := range devs {
			id, _ := crypt.ParseDeviceID(dev.ID)
			if shared, untrusted := e.Shares("f", id); !shared || untrusted != dev.Untrusted {
				return false
			}
		}
		return true
	})
	return r, e
}

type folders struct{ *engine.Engine }

func (e folders) Folder(id string) backup.Folder {
	if h, ok := e.Engine.Folder(id); ok {
		return h
	}
	return nil
}

func (e folders) Each(fn func(backup.Folder)) { e.EachFolder(func(h engine.Folder) { fn(h) }) }

// TestNoPlaintextForReceivers: a device marked untrusted gets no block of
// a folder's files, however it asks, and its plaintext index is refused;
// a trusted device sharing the same folder is served.
func TestNoPlaintextForReceivers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("plaintext"), 0o644); err != nil {
		t.Fatal(err)
	}
	trusted, receiver := crypt.DeviceID{1}, crypt.DeviceID{2}
	r, e := node(t, dir, db.Device{ID: trusted.String()}, db.Device{ID: receiver.String(), Untrusted: true})
	testutil.Eventually(t, 10*time.Second, "secret.txt indexed", func() bool {
		st, _ := e.FolderStatus("f")
		return st.LocalFiles == 1
	})

	block := &protocol.Request{Folder: "f", Name: "secret.txt", Size: 9}
	data, err := r.Request(ctx, protocol.DeviceID(trusted), block)
	if err != nil || string(data) != "plaintext" {
		t.Fatalf("trusted device: %q, %v", data, err)
	}
	for _, kind := range []protocol.RequestKind{protocol.RequestKind_REQUEST_KIND_FILE_BLOCK, protocol.RequestKind_REQUEST_KIND_VERSIONS} {
		req := &protocol.Request{Kind: kind, Folder: "f", Name: "secret.txt", Size: 9}
		if data, err := r.Request(ctx, protocol.DeviceID(receiver), req); !errors.Is(err, protocol.ErrNoSuchFile) {
			t.Fatalf("receiver asking for %v got %q, %v", kind, data, err)
		}
	}
	// A sealed chunk it was never sent is not served either.
	sealed := &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: "f", ChunkId: make([]byte, 32), Size: 1 << 20}
	if _, err := r.Request(ctx, protocol.DeviceID(receiver), sealed); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("receiver asking for an unsent sealed chunk: %v", err)
	}
	if err := r.Index(protocol.DeviceID(receiver), &protocol.Index{Folder: "f", Files: []*protocol.FileInfo{{Name: "x"}}}); err == nil {
		t.Fatal("a plaintext index from a receiver was taken")
	}
}
