package engine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

// TestServeOnlyAnnounced: a trusted peer gets blocks of files this device
// announced, at their announced blocks, and nothing of an ignored file or
// a name never announced, however it asks.
func TestServeOnlyAnnounced(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{".lockstepignore": "secret*\n", "a.txt": "announced", "secret.txt": "ignored"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := startEngine(t, dir, db.Device{ID: crypt.DeviceID{1}.String()})
	waitFor(t, "the scan", func() bool {
		_, ok := e.folder("f").set.Local("a.txt")
		return ok
	})
	l, _ := e.folder("f").set.Local("a.txt")
	ok := &protocol.Request{Folder: "f", Name: "a.txt", Size: 9, Hash: l.Blocks[0].Hash[:]}
	if data, err := e.ServeBlock(ok); err != nil || string(data) != "announced" {
		t.Fatalf("announced block: %q, %v", data, err)
	}
	for what, req := range map[string]*protocol.Request{
		"ignored file":    {Folder: "f", Name: "secret.txt", Size: 7},
		"never announced": {Folder: "f", Name: "nope.txt", Size: 1},
		"another offset":  {Folder: "f", Name: "a.txt", Offset: 1, Size: 8},
		"another size":    {Folder: "f", Name: "a.txt", Size: 4},
		"another hash":    {Folder: "f", Name: "a.txt", Size: 9, Hash: make([]byte, 32)},
	} {
		if data, err := e.ServeBlock(req); !errors.Is(err, protocol.ErrNoSuchFile) {
			t.Errorf("%s: served %q, %v", what, data, err)
		}
	}
}

// TestAdoptRefusesBadPolynomial: a peer's "fixed" polynomial that the
// chunker can't use (0x3: irreducible, of degree 1) is not adopted, and
// the folder goes on chunking with its own.
func TestAdoptRefusesBadPolynomial(t *testing.T) {
	f := idleFolder(t)
	ctx := t.Context()
	mine, err := f.polynomial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.adoptPolynomial(ctx, 0x3, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.polynomial(ctx); got != mine {
		t.Fatalf("polynomial %v adopted from a peer", got)
	}
}
