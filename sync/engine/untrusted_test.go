package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

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
	e := startEngine(t, dir, db.Device{ID: trusted.String()}, db.Device{ID: receiver.String(), Untrusted: true})

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
