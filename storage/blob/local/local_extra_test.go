package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/storage/blob/mem"
	"lockstep/storage/syncahead"
)

func putString(t testing.TB, s blob.Store, key, v string) {
	t.Helper()
	if err := s.Put(context.Background(), key, strings.NewReader(v), int64(len(v))); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func listAll(t testing.TB, s blob.Store, prefix string) []string {
	t.Helper()
	keys := []string{}
	if err := s.List(context.Background(), prefix, func(i blob.Info) error {
		keys = append(keys, i.Key)
		return nil
	}); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func TestLayout(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for key, file := range map[string]string{
		"envelope":      "en/envelope",
		"abc":           "abc",
		"abcd":          "ab/abcd",
		"log/abc":       "log/abc",
		"data/abcdef":   "data/ab/abcdef",
		"data/ab/xyz":   "data/ab/xyz",
		"data/ab/wxyz":  "data/ab/wx/wxyz",
		"x/y/z/0123456": "x/y/z/01/0123456",
	} {
		putString(t, s, key, key)
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
		if err != nil || string(b) != key {
			t.Errorf("key %q: file %s holds %q, %v", key, file, b, err)
		}
	}
	var temps []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if strings.HasPrefix(d.Name(), tempPrefix) {
			temps = append(temps, p)
		}
		return err
	})
	if len(temps) != 0 {
		t.Errorf("temporary files left: %q", temps)
	}
}

func TestForeignEntriesIgnored(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	putString(t, s, "data/abcdef", "x")
	for _, name := range []string{
		".tmp-123", "data/.tmp-456", "data/ab/.tmp-789", "UPPER", "data/abcdefg", // long file outside its shard
		"data/ab/cdef", // shard leaf with the wrong shard
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("foreign"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("ab/abcdef", filepath.Join(dir, "data", "lnk")); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, s, ""); !slices.Equal(got, []string{"data/abcdef"}) {
		t.Fatalf("List = %q, want only the blob", got)
	}
	if _, err := s.Stat(t.Context(), "data/lnk"); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("Stat of a symlink = %v, want ErrNotExist", err)
	}
	if err := s.Get(t.Context(), "data/lnk", func(io.Reader) error { return nil }); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("Get of a symlink = %v, want ErrNotExist", err)
	}
}

func TestNoEscape(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "x"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "evil")); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	err := s.Get(t.Context(), "evil/x", func(r io.Reader) error { return errors.New("read outside") })
	if err == nil || err.Error() == "read outside" {
		t.Fatalf("Get through a symlink out of the directory = %v", err)
	}
	if err := s.Put(t.Context(), "evil/new", strings.NewReader("x"), 1); err == nil {
		t.Fatal("Put through a symlink out of the directory succeeded")
	}
	if err := s.Delete(t.Context(), "evil/x"); err == nil {
		t.Fatal("Delete through a symlink out of the directory succeeded")
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("outside directory changed: %d entries", len(entries))
	}
}

func TestKeyCollisions(t *testing.T) {
	s := open(t, t.TempDir())
	for _, tc := range [][2]string{{"d/ab", "d/abcd"}, {"a", "a/b"}, {"e/f/g", "e/f"}} {
		putString(t, s, tc[0], "first")
		for _, write := range []func() error{
			func() error { return s.Put(t.Context(), tc[1], strings.NewReader("x"), 1) },
			func() error { return s.Create(t.Context(), tc[1], strings.NewReader("x"), 1) },
			func() error { return s.PutUnsynced(t.Context(), tc[1], strings.NewReader("x"), 1) },
		} {
			err := write()
			if err == nil || errors.Is(err, blob.ErrExist) {
				t.Fatalf("writing %q beside %q = %v, want a collision error", tc[1], tc[0], err)
			}
		}
		var got bytes.Buffer
		if err := s.Get(t.Context(), tc[0], func(r io.Reader) error { _, err := got.ReadFrom(r); return err }); err != nil || got.String() != "first" {
			t.Fatalf("Get(%q) after a collision = %q, %v", tc[0], got.String(), err)
		}
	}
}

func TestClean(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	putString(t, s, "data/abcdef", "x")
	old := time.Now().Add(-2 * time.Hour)
	for i, name := range []string{".tmp-a", "data/.tmp-b", "data/ab/.tmp-c", "data/ab/.tmp-new"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := s.Clean(t.Context(), time.Now().Add(-time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("Clean(an hour ago) = %d, %v; want 3", n, err)
	}
	n, err = s.Clean(t.Context(), time.Now().Add(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("Clean(now) = %d, %v; want 1", n, err)
	}
	if n, err := s.Clean(t.Context(), time.Now().Add(time.Second)); err != nil || n != 0 {
		t.Fatalf("Clean of a clean directory = %d, %v", n, err)
	}
	if got := listAll(t, s, ""); !slices.Equal(got, []string{"data/abcdef"}) {
		t.Fatalf("Clean changed the blobs: %q", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Clean(ctx, time.Now()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Clean with a canceled context = %v", err)
	}
}

// TestLinkFallback checks the hard-link Create used where renameat2 with
// RENAME_NOREPLACE is missing.
func TestLinkFallback(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for i, want := range []error{nil, blob.ErrExist} {
		tmp, f, _, err := s.createTemp("data/ab")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("v" + string(rune('0'+i)))
		f.Close()
		if err := s.linkNoReplace(tmp, "data/ab/abcdef"); !errors.Is(err, want) {
			t.Fatalf("linkNoReplace #%d = %v, want %v", i, err, want)
		}
		if want == nil {
			if _, err := s.root.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("temporary file kept after linking: %v", err)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "data", "ab", "abcdef"))
	if err != nil || string(b) != "v0" {
		t.Fatalf("blob = %q, %v; want the first version", b, err)
	}
}

// FuzzList puts the keys of a fuzzed input into a local store and a mem store
// and checks that List agrees for a fuzzed prefix: the sharded layout is
// undone exactly and in order.
func FuzzList(f *testing.F) {
	f.Add("a-b\na/b\nab/x\nabcdef\nb/ab/abcd\nb/abce", "b/ab")
	f.Add("data/abcdef\ndata/ab/xyz\ndata/ab-c\ndata/ab.d", "data/ab")
	f.Add("x\nxy\nxyz\nwxyz\nxy/z", "")
	f.Add("c/d/e/f\nc/d/ef\nc/de", "c/d")
	f.Fuzz(func(t *testing.T, keys, prefix string) {
		if blob.ValidPrefix(prefix) != nil {
			return
		}
		s := open(t, t.TempDir())
		m := mem.New()
		n := 0
		for key := range strings.SplitSeq(keys, "\n") {
			if blob.ValidKey(key) != nil || n == 12 {
				continue
			}
			n++
			if err := s.PutUnsynced(t.Context(), key, strings.NewReader(key), int64(len(key))); err != nil {
				continue // a path collision, which only the directory layout has
			}
			putString(t, m, key, key)
		}
		if got, want := listAll(t, s, prefix), listAll(t, m, prefix); !slices.Equal(got, want) {
			t.Fatalf("List(%q)\n got %q\nwant %q", prefix, got, want)
		}
	})
}

func BenchmarkPut256K(b *testing.B) {
	blobtest.BenchPut(b, open(b, b.TempDir()), 256<<10)
}

func BenchmarkPutUnsynced256K(b *testing.B) {
	for _, wholeFS := range []bool{true, false} {
		for _, batch := range []int{16, 64, 256} {
			name := fmt.Sprintf("syncfs=%v/batch=%d", wholeFS, batch)
			b.Run(name, func(b *testing.B) {
				s := open(b, b.TempDir())
				s.wholeFS = wholeFS && haveSyncfs
				blobtest.BenchPutBatched(b, s, 256<<10, batch)
			})
		}
	}
}

// TestFailedWritesLeaveNoTemp checks that failed and canceled writes remove
// their temporary files.
func TestFailedWritesLeaveNoTemp(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	errBroke := errors.New("broke")
	ctx, cancel := context.WithCancel(t.Context())
	for i, w := range []func() error{
		func() error { return s.Put(t.Context(), "data/abcdef", iotest.ErrReader(errBroke), -1) },
		func() error { return s.Create(t.Context(), "data/abcdef", strings.NewReader("short"), 10) },
		func() error { return s.PutUnsynced(t.Context(), "x/y/z", strings.NewReader("long"), 1) },
		func() error { cancel(); return s.Put(ctx, "data/abcdef", strings.NewReader("x"), 1) },
		func() error {
			putString(t, s, "data/abcdef", "v")
			return s.Create(t.Context(), "data/abcdef", strings.NewReader("x"), 1)
		},
	} {
		if err := w(); err == nil {
			t.Fatalf("write %d succeeded", i)
		}
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSyncWaitsForSyncInProgress: a Sync whose blobs a concurrent Sync took
// into its flush returns only once that flush has ended. Without it the
// second caller would record its blobs as stored while they are not yet
// durable.
func TestSyncWaitsForSyncInProgress(t *testing.T) {
	for _, whole := range []bool{true, false} {
		s := open(t, t.TempDir())
		s.wholeFS = whole
		ctx := context.Background()
		inFlush, release := make(chan struct{}), make(chan struct{})
		s.syncHook = func() {
			close(inFlush)
			<-release
		}
		if err := s.PutUnsynced(ctx, "a", strings.NewReader("a"), 1); err != nil {
			t.Fatal(err)
		}
		first := make(chan error, 1)
		go func() { first <- s.Sync(ctx) }()
		<-inFlush
		s.syncHook = nil
		second := make(chan error, 1)
		go func() { second <- s.Sync(ctx) }()
		select {
		case err := <-second:
			t.Fatalf("wholeFS %v: a Sync returned (%v) while the flush holding its blobs ran", whole, err)
		case <-time.After(100 * time.Millisecond):
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSyncAfterFailedFlush: a Sync that fails must not lose the pending
// set. Here one caller's Sync takes every pending blob (its own and
// another writer's) into its flush and fails (its context ends midway);
// the other writer's Sync, called after its PutUnsynced returned, must
// then either flush that blob or fail. Before, it returned nil having
// flushed nothing, and the writer recorded as stored a blob that never
// reached the disk.
func TestSyncAfterFailedFlush(t *testing.T) {
	// wholeFS off: the path list checks the context between paths, so the
	// failure can be made here; a failing syncfs (EIO, EMFILE on opening the
	// root) would drop the set the same way.
	s := open(t, t.TempDir())
	s.wholeFS = false
	bg := context.Background()
	for _, k := range []string{"a", "b"} {
		if err := s.PutUnsynced(bg, k, strings.NewReader(k), 1); err != nil {
			t.Fatal(err)
		}
	}
	ctxA, cancelA := context.WithCancel(bg)
	flushes := 0
	s.syncHook = func() {
		flushes++
		if flushes == 1 {
			cancelA() // the first caller gives up while its flush runs
		}
	}
	if err := s.Sync(ctxA); err == nil {
		t.Fatal("the first Sync succeeded though its context ended in the flush")
	}
	err := s.Sync(bg)
	if err == nil && flushes < 2 {
		t.Error("Sync returned nil without flushing the blobs a failed Sync had taken")
	}
}

// rangeOf reads n bytes at off of key with GetRange.
func rangeOf(t testing.TB, s *Store, key string, off, n int64) ([]byte, error) {
	t.Helper()
	var got []byte
	err := s.GetRange(context.Background(), key, off, n, func(r io.Reader) error {
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	return got, err
}

// TestGetRangeFollowsTheName: GetRange keeps files open between calls, yet
// always reads the file the key names now: replaced through the store,
// replaced behind its back (as another process sharing the directory
// would), turned into a symlink, or deleted.
func TestGetRangeFollowsTheName(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := context.Background()
	const key = "packs/0123456789abcdef"
	put := func(data string) {
		t.Helper()
		if err := s.Put(ctx, key, strings.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
	want := func(w string) {
		t.Helper()
		got, err := rangeOf(t, s, key, 1, 3)
		if err != nil || string(got) != w {
			t.Fatalf("GetRange = %q, %v; want %q", got, err, w)
		}
	}
	put("aAAAa")
	want("AAA")
	want("AAA")
	put("bBBBb")
	want("BBB")
	path := filepath.Join(dir, filepath.FromSlash(pathOf(key)))
	aside := filepath.Join(dir, "aside")
	if err := os.WriteFile(aside, []byte("cCCCc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(aside, path); err != nil {
		t.Fatal(err)
	}
	want("CCC")
	if err := os.WriteFile(aside, []byte("dDDDd"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(aside, path); err != nil {
		t.Fatal(err)
	}
	if got, err := rangeOf(t, s, key, 1, 3); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("GetRange through a symlink = %q, %v", got, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	put("eEEEe")
	want("EEE")
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got, err := rangeOf(t, s, key, 1, 3); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("GetRange of a deleted blob = %q, %v", got, err)
	}
}

// TestGetRangeConcurrent reads many blobs (more than are kept open) from
// many goroutines at once.
func TestGetRangeConcurrent(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	const keys = maxKeptFiles * 2
	for i := range keys {
		data := strings.Repeat(fmt.Sprintf("%03d", i), 100)
		if err := s.Put(ctx, fmt.Sprintf("packs/%04d", i), strings.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
	inParallel(t, 8, func(g int) error {
		for j := range 500 {
			i := (g*131 + j*17) % keys
			got, err := rangeOf(t, s, fmt.Sprintf("packs/%04d", i), int64(3*(j%50)), 3)
			if err != nil || string(got) != fmt.Sprintf("%03d", i) {
				return fmt.Errorf("blob %d: %q, %v", i, got, err)
			}
		}
		return nil
	})
	s.kept.mu.Lock()
	defer s.kept.mu.Unlock()
	for p, h := range s.kept.m {
		if h.users != 0 {
			t.Errorf("%s still has %d users", p, h.users)
		}
	}
}

// BenchmarkGetRange reads 2 KiB ranges of a 16 MiB pack, as a recovery of
// small files does.
func BenchmarkGetRange(b *testing.B) {
	s := open(b, b.TempDir())
	data := bytes.Repeat([]byte("x"), 16<<20)
	if err := s.Put(context.Background(), "packs/bench", bytes.NewReader(data), int64(len(data))); err != nil {
		b.Fatal(err)
	}
	var off int64
	for b.Loop() {
		if _, err := rangeOf(b, s, "packs/bench", off, 2048); err != nil {
			b.Fatal(err)
		}
		off = (off + 4096) % (16<<20 - 2048)
	}
}

// TestBarriersAheadOfUnsyncedPuts: PutUnsynced of more than
// syncahead.Every bytes makes a barrier in the background, before any Sync.
func TestBarriersAheadOfUnsyncedPuts(t *testing.T) {
	s := open(t, t.TempDir())
	if !s.wholeFS {
		t.Skip("no syncfs: every Sync fsyncs its paths")
	}
	var barriers atomic.Int64
	s.ahead = syncahead.New(func() error {
		barriers.Add(1)
		return s.syncfs()
	})
	data := bytes.Repeat([]byte{1}, 1<<20)
	for i := range syncahead.Every>>20 + 1 {
		if err := s.PutUnsynced(context.Background(), fmt.Sprintf("c/%04d", i), bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
	s.ahead.Wait()
	if barriers.Load() != 1 {
		t.Fatalf("%d barriers in the background, want 1", barriers.Load())
	}
}
