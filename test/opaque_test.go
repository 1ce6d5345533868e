package test

import (
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lockstep/test/testutil"
)

// TestOpaqueStore: a receiver started with --opaque-store keeps a folder
// so that its store shows neither the folder's ID nor its label or
// devices, anywhere; recovery works as before; the store rebuilds the
// receiver's database with the home's store key, and without it serve
// refuses, saying what is missing.
func TestOpaqueStore(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const id = "holiday-photos"
	a, r := startNode(t, "a"), startNode(t, "r", "--opaque-store")
	dirA := filepath.Join(t.TempDir(), "a")
	writeFile(t, filepath.Join(dirA, "beach.jpg"), randomBytes(5, 300<<10), 0o644)
	writeFile(t, filepath.Join(dirA, "notes.txt"), []byte("sunny"), 0o644)
	a.cli("folder", "add", id, dirA, "--label", "Holidays 2026")
	pw := passwordFile(t, "opaque test password")
	backUp(t, a, r, id, pw)

	fi, err := os.Stat(filepath.Join(r.home, "store.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("store key in the receiver's home: %v, %v", fi, err)
	}
	blobs := filepath.Join(r.home, "blobs")
	secrets := []string{id, hex.EncodeToString([]byte(id)), "Holidays", a.ID, "beach"}
	files := 0
	err = filepath.WalkDir(blobs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if strings.Contains(p, s) || strings.Contains(string(data), s) {
				t.Errorf("%s shows %q", p, s)
			}
		}
		return nil
	})
	if err != nil || files < 4 {
		t.Fatalf("walked %d store files: %v", files, err)
	}

	dst := filepath.Join(t.TempDir(), "recovered")
	mustRun(t, newDeviceFor(t, r, id), recoverArgs(r, id, pw, dst)...)
	if d := diffTrees(snapshot(t, dirA), snapshot(t, dst)); d != "" {
		t.Fatalf("recovered tree differs: %s", d)
	}
	records := r.encFolder(id).Receiver.Records

	// The database lost: rebuilt from the store with the home's key.
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"lockstep.db", "lockstep.db-wal", "lockstep.db-shm"} {
		if err := os.Remove(filepath.Join(r.home, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	keyless := filepath.Join(t.TempDir(), "keyless")
	copyTree(t, r.home, keyless)
	if err := os.Remove(filepath.Join(keyless, "store.key")); err != nil {
		t.Fatal(err)
	}
	r = startNodeIn(t, "r", r.home)
	testutil.Eventually(t, converge, "r to hold the rebuilt folder", func() bool {
		f := r.encFolder(id)
		return f.Receiver != nil && f.Receiver.Records == records
	})
	if out := r.cli("check", id); !strings.Contains(out, "clean") {
		t.Errorf("check of the rebuilt folder: %s", out)
	}

	res := run(t, keyless, "serve", "--listen", "tcp://127.0.0.1:0", "--gui", "127.0.0.1:0")
	if res.code == 0 || !strings.Contains(res.stderr, "store.key") {
		t.Fatalf("serve over an opaque store without its key: exit %d, stderr %q", res.code, res.stderr)
	}
}
