package fsys

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestFaultyPassesThrough(t *testing.T) {
	r, dir := openRoot(t)
	f := &Faulty{FS: r}
	testRoundTrip(t, f, dir)
	if got := f.Written(); got != 11 {
		t.Errorf("Written() = %d, want 11", got)
	}
}

// writeTemp writes data to a new temp file through fsys and returns the
// temp name and the result of the write.
func writeTemp(t *testing.T, fsys FS, data []byte) (string, int, error) {
	t.Helper()
	f, name, err := fsys.CreateTemp("x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Write(data)
	return name, n, err
}

func TestFaultyDiskFullBoundaries(t *testing.T) {
	const limit = 10
	for _, size := range []int{limit - 1, limit, limit + 1} {
		r, dir := openRoot(t)
		f := &Faulty{FS: r}
		f.DiskFullAfter(limit)
		name, n, err := writeTemp(t, f, bytes.Repeat([]byte("z"), size))
		wantN := min(size, limit)
		if n != wantN {
			t.Errorf("size %d: wrote %d, want %d", size, n, wantN)
		}
		if full := size > limit; full != errors.Is(err, syscall.ENOSPC) {
			t.Errorf("size %d: err = %v", size, err)
		}
		if fi, _ := os.Stat(filepath.Join(dir, name)); fi.Size() != int64(wantN) {
			t.Errorf("size %d: file on disk has %d bytes, want %d", size, fi.Size(), wantN)
		}
		// Once the limit is reached, every further byte fails, and other
		// operations go on.
		_, n, err = writeTemp(t, f, []byte("y"))
		if full := size >= limit; full != errors.Is(err, syscall.ENOSPC) || (full && n != 0) {
			t.Errorf("size %d: next write = %d, %v", size, n, err)
		}
		if _, err := f.Lstat(name); err != nil {
			t.Errorf("Lstat after disk full: %v", err)
		}
	}
}

func TestFaultyDiskFullCountsAllFiles(t *testing.T) {
	r, _ := openRoot(t)
	f := &Faulty{FS: r}
	f.DiskFullAfter(10)
	if _, n, err := writeTemp(t, f, make([]byte, 6)); n != 6 || err != nil {
		t.Fatalf("first file: %d, %v", n, err)
	}
	file, _, err := f.CreateTemp("y")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	n, err := file.WriteAt(make([]byte, 6), 100)
	if n != 4 || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("WriteAt past the limit = %d, %v; want 4, ENOSPC", n, err)
	}
	if got := f.Written(); got != 10 {
		t.Errorf("Written() = %d", got)
	}
	if n, err := file.Write(nil); n != 0 || err != nil {
		t.Errorf("empty write on a full disk = %d, %v", n, err)
	}
	f.DiskFullAfter(0)
	if n, err := file.Write([]byte("a")); n != 0 || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("DiskFullAfter(0) then write = %d, %v", n, err)
	}
}

func TestFaultyCrash(t *testing.T) {
	const limit = 8
	for _, size := range []int{limit - 1, limit, limit + 1} {
		r, dir := openRoot(t)
		f := &Faulty{FS: r}
		f.CrashAfter(limit)
		name, n, err := writeTemp(t, f, bytes.Repeat([]byte("c"), size))
		crashed := size > limit
		if n != min(size, limit) || crashed != errors.Is(err, ErrCrashed) || crashed != f.Crashed() {
			t.Errorf("size %d: wrote %d, %v, crashed %v", size, n, err, f.Crashed())
		}
		_, err = f.Lstat(name)
		if crashed != errors.Is(err, ErrCrashed) {
			t.Errorf("size %d: Lstat after the write: %v", size, err)
		}
		if !crashed {
			continue
		}
		for op, err := range map[string]error{
			"Rename":   f.Rename(name, "x"),
			"Sync":     f.Sync(),
			"MkdirAll": f.MkdirAll("d", 0o755),
		} {
			if !errors.Is(err, ErrCrashed) {
				t.Errorf("%s after crash: %v", op, err)
			}
		}
		// "Restart": the real directory holds the torn temp file.
		r2, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := r2.Lstat(name)
		if err != nil || fi.Size() != limit {
			t.Errorf("after restart: %v, %v; want %d bytes", fi, err, limit)
		}
		if _, err := r2.Lstat("x"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("rename after crash reached the disk: %v", err)
		}
		r2.Close()
	}
}

func TestFaultyFailOp(t *testing.T) {
	r, dir := openRoot(t)
	f := &Faulty{FS: r}
	for _, n := range []string{"a", "b", "c"} {
		writeOS(t, filepath.Join(dir, n), n)
	}
	f.FailOp(OpRename, 2, syscall.EIO)
	for i, tc := range []struct {
		from, to string
		fail     bool
	}{{"a", "a1", false}, {"b", "b1", true}, {"c", "c1", false}} {
		err := f.Rename(tc.from, tc.to)
		if tc.fail != errors.Is(err, syscall.EIO) || (!tc.fail && err != nil) {
			t.Errorf("rename %d: %v", i+1, err)
		}
		var pe *fs.PathError
		if tc.fail && (!errors.As(err, &pe) || pe.Op != "rename") {
			t.Errorf("injected error is not a PathError: %#v", err)
		}
		_, err = os.Lstat(filepath.Join(dir, tc.to))
		if tc.fail != errors.Is(err, fs.ErrNotExist) {
			t.Errorf("rename %d reached the disk: %v", i+1, err)
		}
	}
	// Other kinds are unaffected; file operations count separately.
	file, _, err := f.CreateTemp("x")
	if err != nil {
		t.Fatal(err)
	}
	f.FailOp(OpFileSync, 1, syscall.EIO)
	f.FailOp(OpWrite, 2, syscall.EIO)
	if _, err := file.Write([]byte("1")); err != nil {
		t.Error(err)
	}
	if n, err := file.Write([]byte("2")); n != 0 || !errors.Is(err, syscall.EIO) {
		t.Errorf("second write = %d, %v", n, err)
	}
	if err := file.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("Sync = %v", err)
	}
	if err := file.Sync(); err != nil {
		t.Errorf("second Sync = %v", err)
	}
	f.FailOp(OpClose, 1, syscall.EIO)
	if err := file.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("Close = %v", err)
	}
	if f.Written() != 1 {
		t.Errorf("Written() = %d", f.Written())
	}

	rf, err := f.Open("a1")
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	f.FailOp(OpRead, 1, syscall.EIO)
	if _, err := io.ReadAll(rf); !errors.Is(err, syscall.EIO) {
		t.Errorf("read = %v", err)
	}
	if b, err := io.ReadAll(rf); err != nil || string(b) != "a" {
		t.Errorf("read after the fault = %q, %v", b, err)
	}
}

func TestFaultySlowWrites(t *testing.T) {
	r, _ := openRoot(t)
	f := &Faulty{FS: r}
	const d = 5 * time.Millisecond
	f.SlowWrites(d)
	file, _, err := f.CreateTemp("x")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	start := time.Now()
	for range 3 {
		if _, err := file.Write([]byte("s")); err != nil {
			t.Fatal(err)
		}
	}
	// A lower bound only: the writes must have slept.
	if got := time.Since(start); got < 3*d {
		t.Errorf("3 slow writes took %v, less than %v", got, 3*d)
	}
}

func TestFaultyConcurrent(t *testing.T) {
	r, _ := openRoot(t)
	f := &Faulty{FS: r}
	f.DiskFullAfter(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 8 {
		wg.Go(func() {
			file, _, err := f.CreateTemp("x")
			if err != nil {
				t.Error(err)
				return
			}
			defer file.Close()
			for range 50 {
				n, _ := file.Write(make([]byte, 7))
				mu.Lock()
				total += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total != 1000 || f.Written() != 1000 {
		t.Errorf("wrote %d bytes, Written() = %d; want 1000", total, f.Written())
	}
}
