package receiver

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lockstep/storage/blob/local"
	"lockstep/test/testutil"
)

// TestServeCleansTemps: Serve removes at start the temporary files that
// writes interrupted by a crash left in a local store, once they are older
// than the grace period; a fresh one, of a write that may be in progress,
// stays.
func TestServeCleansTemps(t *testing.T) {
	dir := t.TempDir()
	store, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	n := newNode(t, store)
	// Beside the meta object, and in a chunk's shard directory.
	chunkDir := filepath.Join(dir, "r", folderKey(folderID), "c")
	if err := os.MkdirAll(filepath.Join(chunkDir, "ab"), 0o700); err != nil {
		t.Fatal(err)
	}
	stale := []string{
		filepath.Join(dir, "r", folderKey(folderID), ".tmp-1234"),
		filepath.Join(chunkDir, "ab", ".tmp-5678"),
	}
	fresh := filepath.Join(chunkDir, "ab", ".tmp-9abc")
	long := time.Now().Add(-tempGrace - time.Minute)
	for _, p := range append(stale, fresh) {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range stale {
		if err := os.Chtimes(p, long, long); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.r.Serve(ctx, 0) }()
	testutil.Eventually(t, waitTimeout, "stale temporary files to go", func() bool {
		for _, p := range stale {
			if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a fresh temporary file went: %v", err)
	}
	if _, err := store.Stat(context.Background(), metaKey(folderKey(folderID))); err != nil {
		t.Fatalf("the meta object: %v", err)
	}
}
