package fsys

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// openRoot opens a fresh Root on an empty directory and returns it and the
// directory's OS path.
func openRoot(t testing.TB) (*Root, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func writeOS(t testing.TB, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlinkOS(t testing.TB, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

func entries(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// testRoundTrip is the write path of a pull: MkdirAll, CreateTemp, write,
// Sync, Chmod, Chtimes, Rename over the old file, SyncDir, Sync; then reads
// it back. Both Root and a fault-free Faulty must pass it.
func testRoundTrip(t *testing.T, fsys FS, dir string) {
	if err := fsys.MkdirAll("a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll("a/b", 0o755); err != nil {
		t.Fatalf("MkdirAll of an existing dir: %v", err)
	}
	writeOS(t, filepath.Join(dir, "a/b/f"), "old contents, longer than the new")
	mtime := time.Date(2021, 3, 4, 5, 6, 7, 890123456, time.UTC)

	f, tmp, err := fsys.CreateTemp("a/b/f")
	if err != nil {
		t.Fatal(err)
	}
	if path.Dir(tmp) != "a/b" || !IsTemp(path.Base(tmp)) || f.Name() != tmp {
		t.Fatalf("CreateTemp: name %q, File.Name %q", tmp, f.Name())
	}
	if _, err := f.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("world"), 6); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 11 {
		t.Fatalf("Stat = %v, %v; want size 11", fi, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Chmod(tmp, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Chtimes(tmp, mtime); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(tmp, "a/b/f"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("a/b"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}

	if _, err := fsys.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temp file still there after Rename: %v", err)
	}
	fi, err := fsys.Lstat("a/b/f")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o640 || !fi.ModTime().Equal(mtime) {
		t.Errorf("after rename: mode %v mtime %v, want -rw-r----- %v", fi.Mode(), fi.ModTime(), mtime)
	}
	rf, err := fsys.Open("a/b/f")
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	got, err := io.ReadAll(rf)
	if err != nil || string(got) != "hello world" {
		t.Fatalf("read back %q, %v", got, err)
	}
	buf := make([]byte, 5)
	if _, err := rf.ReadAt(buf, 6); err != nil || string(buf) != "world" {
		t.Fatalf("ReadAt = %q, %v", buf, err)
	}
	if rf.Name() != "a/b/f" {
		t.Errorf("Name() = %q", rf.Name())
	}
	es, err := fsys.ReadDir("a/b")
	if err != nil || len(es) != 1 || es[0].Name() != "f" {
		t.Errorf("ReadDir = %v, %v; want [f]", es, err)
	}
}

func TestRootRoundTrip(t *testing.T) {
	r, dir := openRoot(t)
	testRoundTrip(t, r, dir)
}

func TestCreateTempUnique(t *testing.T) {
	r, dir := openRoot(t)
	seen := map[string]bool{}
	for range 50 {
		f, name, err := r.CreateTemp("x")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if seen[name] || path.Dir(name) != "." {
			t.Fatalf("CreateTemp gave %q", name)
		}
		seen[name] = true
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || fi.Mode() != 0o600 {
			t.Fatalf("temp file %q: %v %v", name, fi, err)
		}
	}
	if _, _, err := r.CreateTemp("missing/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CreateTemp in a missing dir: %v", err)
	}
}

func TestReadDirSortedAndRoot(t *testing.T) {
	r, dir := openRoot(t)
	for _, n := range []string{"c", "a", "B", "b"} {
		writeOS(t, filepath.Join(dir, n), n)
	}
	es, err := r.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"B", "a", "b", "c"}) {
		t.Errorf("ReadDir(.) = %v", names)
	}
	if _, err := r.ReadDir("a"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("ReadDir of a file: %v", err)
	}
	if err := r.SyncDir("."); err != nil {
		t.Errorf("SyncDir(.) = %v", err)
	}
	if fi, err := r.Lstat("."); err != nil || !fi.IsDir() {
		t.Errorf("Lstat(.) = %v, %v", fi, err)
	}
}

func TestOpenRefusesSymlinksAndNonFiles(t *testing.T) {
	r, dir := openRoot(t)
	outside := t.TempDir()
	writeOS(t, filepath.Join(outside, "secret"), "secret")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeOS(t, filepath.Join(dir, "sub/f"), "data")
	symlinkOS(t, "sub/f", filepath.Join(dir, "lf"))
	symlinkOS(t, "sub", filepath.Join(dir, "ld"))
	symlinkOS(t, filepath.Join(outside, "secret"), filepath.Join(dir, "lout"))
	symlinkOS(t, outside, filepath.Join(dir, "dout"))

	for _, name := range []string{"lf", "ld", "lout", "dout"} {
		if f, err := r.Open(name); !errors.Is(err, ErrIsSymlink) {
			t.Errorf("Open(%q) = %v, %v; want ErrIsSymlink", name, f, err)
		}
	}
	for _, name := range []string{"ld", "dout"} {
		if _, err := r.ReadDir(name); !errors.Is(err, ErrIsSymlink) {
			t.Errorf("ReadDir(%q) = %v; want ErrIsSymlink", name, err)
		}
		if err := r.SyncDir(name); !errors.Is(err, ErrIsSymlink) {
			t.Errorf("SyncDir(%q) = %v; want ErrIsSymlink", name, err)
		}
	}
	if _, err := r.Open("sub"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Open(dir) = %v; want ErrNotRegular", err)
	}
	// Reads through a symlink parent stay inside the folder.
	if f, err := r.Open("dout/secret"); err == nil {
		f.Close()
		t.Error("Open through a symlink to outside the folder succeeded")
	}
	if _, err := r.Lstat("dout/secret"); err == nil {
		t.Error("Lstat through a symlink to outside the folder succeeded")
	}
	fi, err := r.Lstat("lout")
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(lout) = %v, %v; want a symlink", fi, err)
	}
	if f, err := r.Open("sub/f"); err != nil {
		t.Errorf("Open(sub/f) = %v", err)
	} else {
		f.Close()
	}
}

func TestOpenMissingDir(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	writeOS(t, file, "x")
	if _, err := Open(file); err == nil {
		t.Error("Open(file) succeeded")
	}
}

func TestFileReadFromFastPath(t *testing.T) {
	// io.Copy into a Root's file reaches *os.File's ReadFrom.
	r, _ := openRoot(t)
	f, _, err := r.CreateTemp("x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(io.ReaderFrom); !ok {
		t.Error("Root's File does not implement io.ReaderFrom")
	}
	data := bytes.Repeat([]byte("0123456789"), 1000)
	if n, err := io.Copy(f, bytes.NewReader(data)); err != nil || n != int64(len(data)) {
		t.Fatalf("io.Copy = %d, %v", n, err)
	}
}

// SetModeTime sets a created file's mode and time through the open file,
// exactly as Chmod and Chtimes would by name.
func TestSetModeTime(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, tmp, err := r.CreateTemp("x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(1700000000, 123456789)
	if !SetModeTime(f, 0o640, mtime) {
		if runtime.GOOS == "linux" {
			t.Fatal("SetModeTime did nothing on Linux")
		}
		t.Skip("not on this system")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, tmp))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(mtime) {
		t.Fatalf("mode %v, mtime %v; want 0640 and %v", fi.Mode().Perm(), fi.ModTime(), mtime)
	}
	// Not a file of this package's: the caller goes by name.
	if SetModeTime(nil, 0o600, mtime) {
		t.Fatal("SetModeTime took a nil File")
	}
}
