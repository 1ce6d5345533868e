package engine

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
	"lockstep/sync/protocol"
)

// TestNoPlaintextForReceivers: a device marked untrusted gets no block of
// a folder's files, however it asks, and its plaintext index is refused;
// a trusted device sharing the same folder is served.
func TestNoPlaintextForReceivers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("plaintext"), 0o644); err != nil {
		t.Fatal(err)
	}
	trusted, receiver := crypt.DeviceID{1}, crypt.DeviceID{2}
	for _, dev := range []db.Device{{ID: trusted.String()}, {ID: receiver.String(), Untrusted: true}} {
		if err := d.PutDevice(ctx, dev); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.PutFolder(ctx, db.Folder{ID: "f", Path: dir, Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []crypt.DeviceID{trusted, receiver} {
		if err := d.ShareFolder(ctx, "f", dev.String()); err != nil {
			t.Fatal(err)
		}
	}
	e := New(crypt.DeviceID{9}, d, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for e.folder("f") == nil || !e.folder("f").untrusted(receiver) {
		if time.Now().After(deadline) {
			t.Fatal("folder did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}

	block := &protocol.Request{Folder: "f", Name: "secret.txt", Size: 9}
	data, err := e.Request(ctx, protocol.DeviceID(trusted), block)
	if err != nil || string(data) != "plaintext" {
		t.Fatalf("trusted device: %q, %v", data, err)
	}
	for _, kind := range []protocol.RequestKind{protocol.RequestKind_REQUEST_KIND_FILE_BLOCK, protocol.RequestKind_REQUEST_KIND_VERSIONS} {
		req := &protocol.Request{Kind: kind, Folder: "f", Name: "secret.txt", Size: 9}
		if data, err := e.Request(ctx, protocol.DeviceID(receiver), req); !errors.Is(err, protocol.ErrNoSuchFile) {
			t.Fatalf("receiver asking for %v got %q, %v", kind, data, err)
		}
	}
	// A sealed chunk it was never sent is not served either.
	sealed := &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: "f", ChunkId: make([]byte, 32), Size: 1 << 20}
	if _, err := e.Request(ctx, protocol.DeviceID(receiver), sealed); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("receiver asking for an unsent sealed chunk: %v", err)
	}
	if err := e.indexUpdate(receiver, "f", []*protocol.FileInfo{{Name: "x"}}); err == nil {
		t.Fatal("a plaintext index from a receiver was taken")
	}
}
