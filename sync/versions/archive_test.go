package versions

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"lockstep/sync/fsys"
)

// t0 is the synthetic clock's origin.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// folder is a real folder in a temp dir with an archive on it.
type folder struct {
	t   *testing.T
	dir string
	fs  *fsys.Root
	a   *Archive
}

func newFolder(t *testing.T, p Policy) *folder {
	t.Helper()
	dir := t.TempDir()
	r, err := fsys.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &folder{t: t, dir: dir, fs: r, a: New(r, p)}
}

// write creates name with content, as a local program would.
func (f *folder) write(name, content string) {
	f.t.Helper()
	p := filepath.Join(f.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// saveAt writes name with content and archives it at time at.
func (f *folder) saveAt(name, content string, at time.Time) {
	f.t.Helper()
	f.write(name, content)
	if err := f.a.Save(name, at); err != nil {
		f.t.Fatalf("Save(%q): %v", name, err)
	}
}

func (f *folder) read(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(name)))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func (f *folder) exists(name string) bool {
	_, err := os.Lstat(filepath.Join(f.dir, filepath.FromSlash(name)))
	return err == nil
}

func (f *folder) list(name string) []Version {
	f.t.Helper()
	vs, err := f.a.List(name)
	if err != nil {
		f.t.Fatalf("List(%q): %v", name, err)
	}
	return vs
}

func ids(vs []Version) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID
	}
	return out
}

func TestSaveListRestore(t *testing.T) {
	f := newFolder(t, Policy{Type: Simple, Keep: 5})
	f.write("a/b.txt", "old content")
	p := filepath.Join(f.dir, "a", "b.txt")
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	// A time zone other than UTC: the name is in UTC all the same.
	at := t0.In(time.FixedZone("east", 5*3600))
	if err := f.a.Save("a/b.txt", at); err != nil {
		t.Fatal(err)
	}
	if f.exists("a/b.txt") {
		t.Fatal("the file is still in place after Save")
	}
	const id = "a/b~20260102-030405.txt"
	if got := f.read(Dir + "/" + id); got != "old content" {
		t.Fatalf("archived content = %q", got)
	}
	want := Version{Path: "a/b.txt", ID: id, Time: t0, Size: int64(len("old content")), ModTime: mtime}
	for _, name := range []string{"a/b.txt", ""} {
		vs := f.list(name)
		if len(vs) != 1 {
			t.Fatalf("List(%q) = %v, want one version", name, vs)
		}
		v := vs[0]
		if v.Path != want.Path || v.ID != want.ID || !v.Time.Equal(want.Time) || v.Size != want.Size || !v.ModTime.Equal(want.ModTime) {
			t.Fatalf("List(%q)[0] = %+v, want %+v", name, v, want)
		}
	}
	if vs := f.list("a/other.txt"); len(vs) != 0 {
		t.Fatalf("List of another file = %v", vs)
	}

	for _, dst := range []string{"a/b.txt", "new/dir/b.txt"} {
		f.write("a/b.txt", "current") // Restore replaces whatever is there
		if err := f.a.Restore(id, dst); err != nil {
			t.Fatalf("Restore to %s: %v", dst, err)
		}
		if got := f.read(dst); got != "old content" {
			t.Fatalf("restored %s = %q", dst, got)
		}
		fi, err := os.Stat(filepath.Join(f.dir, filepath.FromSlash(dst)))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(mtime) || fi.Mode().Perm() != 0o640 {
			t.Fatalf("restored %s: mtime %v mode %v, want %v %v", dst, fi.ModTime(), fi.Mode().Perm(), mtime, fs.FileMode(0o640))
		}
	}
	if got := f.read(Dir + "/" + id); got != "old content" {
		t.Fatalf("the version changed after Restore: %q", got)
	}
	entries, err := os.ReadDir(filepath.Join(f.dir, "new", "dir"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("Restore left %v (%v), want only the file", entries, err)
	}
}

func TestRestoreErrors(t *testing.T) {
	f := newFolder(t, Policy{Type: Simple, Keep: 5})
	f.saveAt("b.txt", "v", t0)
	for _, id := range []string{"", "b.txt", "../b~20260102-030405.txt", "/b~20260102-030405.txt", "b~20261302-030405.txt"} {
		if err := f.a.Restore(id, "x"); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Restore(%q) = %v, want ErrInvalidID", id, err)
		}
	}
	if err := f.a.Restore("b~20260102-030406.txt", "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Restore of a missing version = %v, want fs.ErrNotExist", err)
	}
	for _, dst := range []string{"", "../x", Dir + "/x"} {
		if err := f.a.Restore("b~20260102-030405.txt", dst); !errors.Is(err, fsys.ErrInvalidName) {
			t.Errorf("Restore to %q = %v, want ErrInvalidName", dst, err)
		}
	}
	// A symlink with a version's name is not read through.
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.dir, Dir, "s~20260102-030405")); err != nil {
		t.Fatal(err)
	}
	if err := f.a.Restore("s~20260102-030405", "s"); !errors.Is(err, fsys.ErrIsSymlink) {
		t.Errorf("Restore of a symlink = %v, want ErrIsSymlink", err)
	}
	if f.exists("s") {
		t.Error("Restore of a symlink wrote the destination")
	}
}

func TestSaveSameSecond(t *testing.T) {
	f := newFolder(t, Policy{Type: Trashcan})
	for i, c := range []string{"one", "two", "three"} {
		f.saveAt("d/f.tar.gz", c, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	f.saveAt("d/f.tar.gz", "four", t0.Add(time.Second))
	got := ids(f.list("d/f.tar.gz"))
	want := []string{
		"d/f.tar~20260102-030406.gz",
		"d/f.tar~20260102-030405-3.gz",
		"d/f.tar~20260102-030405-2.gz",
		"d/f.tar~20260102-030405.gz",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	for i, c := range []string{"four", "three", "two", "one"} {
		if got := f.read(Dir + "/" + want[i]); got != c {
			t.Errorf("%s = %q, want %q", want[i], got, c)
		}
	}
}

func TestNames(t *testing.T) {
	cases := []struct{ name, id string }{
		{"a.tar.gz", "a.tar~20260102-030405.gz"},
		{".bashrc", ".bashrc~20260102-030405"},
		{".bashrc.bak", ".bashrc~20260102-030405.bak"},
		{"Makefile", "Makefile~20260102-030405"},
		{"trailing.", "trailing~20260102-030405."},
		{"..a", ".~20260102-030405.a"},
		{"x~20250101-000000", "x~20250101-000000~20260102-030405"},
		{"n.x~20250101-000000", "n~20260102-030405.x~20250101-000000"},
		{"dir with space/file name.txt", "dir with space/file name~20260102-030405.txt"},
		{"ünï/çødé 日本.md", "ünï/çødé 日本~20260102-030405.md"},
	}
	f := newFolder(t, Policy{Type: Staggered, Days: 365})
	for _, c := range cases {
		f.saveAt(c.name, "content of "+c.name, t0)
		if got := f.read(Dir + "/" + c.id); got != "content of "+c.name {
			t.Errorf("%s: archived %q = %q", c.name, c.id, got)
		}
		vs := f.list(c.name)
		if len(vs) != 1 || vs[0].ID != c.id || vs[0].Path != c.name {
			t.Errorf("List(%q) = %+v, want ID %q", c.name, vs, c.id)
			continue
		}
		if err := f.a.Restore(c.id, "restored/"+c.name); err != nil {
			t.Errorf("Restore(%q): %v", c.id, err)
		} else if got := f.read("restored/" + c.name); got != "content of "+c.name {
			t.Errorf("restored %s = %q", c.name, got)
		}
	}
	if got := len(f.list("")); got != len(cases) {
		t.Errorf("List(\"\") has %d versions, want %d", got, len(cases))
	}
}

func TestNone(t *testing.T) {
	for _, p := range []Policy{{}, {Type: None}} {
		f := newFolder(t, p)
		f.write("f", "x")
		if err := f.a.Save("f", t0); !errors.Is(err, ErrNoVersioning) {
			t.Fatalf("Save with %+v = %v, want ErrNoVersioning", p, err)
		}
		if f.read("f") != "x" || f.exists(fsys.InternalDir) {
			t.Fatal("Save with versioning off touched the folder")
		}
		// Versions from an earlier policy stay listable and are not cleaned.
		if err := New(f.fs, Policy{Type: Trashcan}).Save("f", t0); err != nil {
			t.Fatal(err)
		}
		if vs := f.list(""); len(vs) != 1 {
			t.Fatalf("List = %v, want the earlier version", vs)
		}
		removed, err := f.a.Clean(t0.Add(1000 * day))
		if err != nil || len(removed) != 0 || len(f.list("")) != 1 {
			t.Fatalf("Clean with versioning off removed %v (%v)", removed, err)
		}
	}
}

func TestRestoreKeepsBytes(t *testing.T) {
	f := newFolder(t, Policy{Type: Simple, Keep: 1})
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16+3)
	f.write("big", string(big))
	if err := f.a.Save("big", t0); err != nil {
		t.Fatal(err)
	}
	if err := f.a.Restore("big~20260102-030405", "big"); err != nil {
		t.Fatal(err)
	}
	if got := f.read("big"); got != string(big) {
		t.Fatalf("restored %d bytes, want %d", len(got), len(big))
	}
}

// TestRestoreFaults: a restore that fails at any step leaves the
// destination as it was and no temp file behind.
func TestRestoreFaults(t *testing.T) {
	faults := []struct {
		what string
		set  func(*fsys.Faulty)
	}{
		{"disk full", func(q *fsys.Faulty) { q.DiskFullAfter(10) }},
		{"file sync", func(q *fsys.Faulty) { q.FailOp(fsys.OpFileSync, 1, syscall.EIO) }},
		{"chtimes", func(q *fsys.Faulty) { q.FailOp(fsys.OpChtimes, 1, syscall.EIO) }},
		{"rename", func(q *fsys.Faulty) { q.FailOp(fsys.OpRename, 1, syscall.EIO) }},
	}
	for _, fault := range faults {
		t.Run(fault.what, func(t *testing.T) {
			f := newFolder(t, Policy{Type: Simple, Keep: 1})
			f.saveAt("d/f", strings.Repeat("old ", 100), t0)
			f.write("d/f", "current")
			q := &fsys.Faulty{FS: f.fs}
			fault.set(q)
			if err := New(q, f.a.policy).Restore("d/f~20260102-030405", "d/f"); err == nil {
				t.Fatal("Restore succeeded despite the fault")
			}
			if got := f.read("d/f"); got != "current" {
				t.Fatalf("d/f = %q after a failed restore", got)
			}
			entries, err := os.ReadDir(filepath.Join(f.dir, "d"))
			if err != nil || len(entries) != 1 {
				t.Fatalf("d holds %v (%v), want only f", entries, err)
			}
		})
	}
}
