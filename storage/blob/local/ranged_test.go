package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// openFilesUnder returns the files below dir this process has open, as
// /proc/self/fd names them ("... (deleted)" for a removed file). It skips
// the test where there is no /proc.
func openFilesUnder(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var open []string
	for _, e := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue // the fd of ReadDir itself, closed by now
		}
		if strings.HasPrefix(target, dir+string(filepath.Separator)) {
			open = append(open, target)
		}
	}
	return open
}

// openWatched opens a store in a new directory whose open files
// openFilesUnder can list; it skips the test where there is no /proc.
func openWatched(t *testing.T) (*Store, string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	openFilesUnder(t, dir)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// TestGetRangeReleasesRemovedBlobs: once a blob is deleted, or replaced,
// through the store, no file of its old version may stay open. A file kept
// open for ranged reads pins the disk space of a deleted pack (and leaves a
// ".nfs*" entry behind on NFS) for as long as the Store lives, unless other
// ranged reads happen to evict it.
func TestGetRangeReleasesRemovedBlobs(t *testing.T) {
	ctx := context.Background()
	for _, replace := range []bool{false, true} {
		name := "delete"
		if replace {
			name = "replace"
		}
		t.Run(name, func(t *testing.T) {
			s, dir := openWatched(t)
			defer s.Close()
			const key = "packs/0123456789abcdef"
			data := strings.Repeat("x", 1<<16)
			if err := s.Put(ctx, key, strings.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			// n-1, n, n+1 reads of the same blob: one file, kept or not.
			for range 3 {
				if got, err := rangeOf(t, s, key, 10, 3); err != nil || string(got) != "xxx" {
					t.Fatalf("GetRange = %q, %v", got, err)
				}
			}
			if replace {
				if err := s.Put(ctx, key, strings.NewReader("y"), 1); err != nil {
					t.Fatal(err)
				}
			} else if err := s.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			var stale []string
			for _, f := range openFilesUnder(t, dir) {
				if strings.HasSuffix(f, " (deleted)") {
					stale = append(stale, f)
				}
			}
			if len(stale) > 0 {
				t.Errorf("after the blob's %s, the store still holds its old file open: %q", name, stale)
			}
		})
	}
}

// TestCloseWhileReading: files that ranged reads racing Close open are not
// kept, so none stays open once the reads end.
func TestCloseWhileReading(t *testing.T) {
	s, dir := openWatched(t)
	ctx := context.Background()
	for i := range 8 {
		if err := s.Put(ctx, fmt.Sprintf("packs/%04d", i), strings.NewReader("abcdef"), 6); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var reads atomic.Int64
	for g := range 16 {
		wg.Go(func() {
			for j := 0; ; j++ {
				if _, err := rangeOf(t, s, fmt.Sprintf("packs/%04d", (g+j)%8), 1, 3); err != nil {
					return // the store closed under it
				}
				reads.Add(1)
			}
		})
	}
	// Close once the readers are well under way: some reads each.
	testutil.Eventually(t, 10*time.Second, "the readers to be reading", func() bool { return reads.Load() >= 16*8 })
	s.Close()
	wg.Wait()
	if open := openFilesUnder(t, dir); len(open) > 0 {
		t.Errorf("after Close and the last read, still open: %q", open)
	}
}

// TestDirCacheFullUnderUse: when the directory-handle cache fills, the
// handles it lets go are closed only once nobody uses them. Before, they
// were closed at once, and a write or read using one failed with "file
// already closed".
func TestDirCacheFullUnderUse(t *testing.T) {
	s := open(t, t.TempDir())
	s.dirs.max = 2
	ctx := context.Background()
	inParallel(t, 8, func(g int) error {
		for j := range 300 {
			// Keys spread over many shard directories.
			key := fmt.Sprintf("chunks/%02x%04d", (g*37+j*11)%64, j)
			if err := s.PutUnsynced(ctx, key, strings.NewReader(key), int64(len(key))); err != nil {
				return fmt.Errorf("put %s: %w", key, err)
			}
			got, err := rangeOf(t, s, key, 0, int64(len(key)))
			if err != nil || string(got) != key {
				return fmt.Errorf("read %s: %q, %v", key, got, err)
			}
		}
		return nil
	})
}

// inParallel runs fn in n goroutines, numbered 0 to n-1, and reports
// every error they return.
func inParallel(t *testing.T, n int, fn func(g int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range n {
		wg.Go(func() {
			if err := fn(g); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
