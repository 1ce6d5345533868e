package versions

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"lockstep/sync/fsys"
)

func TestSaveRefuses(t *testing.T) {
	f := newFolder(t, Policy{Type: Trashcan})
	f.write("dir/f", "x")
	if err := os.Symlink("dir/f", filepath.Join(f.dir, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		want error
	}{
		{"dir", ErrNotFile},
		{"link", ErrNotFile},
		{"missing", fs.ErrNotExist},
		{"", fsys.ErrInvalidName},
		{"../x", fsys.ErrInvalidName},
		{".lockstep/versions/x", fsys.ErrInvalidName},
		{".LockStep/x", fsys.ErrInvalidName},
		{"dir/" + fsys.TempPrefix + "1", fsys.ErrInvalidName},
	}
	for _, c := range cases {
		if err := f.a.Save(c.name, t0); !errors.Is(err, c.want) {
			t.Errorf("Save(%q) = %v, want %v", c.name, err, c.want)
		}
	}
	if !f.exists("link") || f.read("dir/f") != "x" || len(f.list("")) != 0 {
		t.Error("a refused Save changed the folder")
	}
}

func TestSymlinkOnArchivePath(t *testing.T) {
	cases := []struct {
		link string // planted as a symlink to an outside directory
		want error
	}{
		{".lockstep", fsys.ErrSymlinkParent},
		{".lockstep/versions", fsys.ErrSymlinkParent},
		{".lockstep/versions/sub", fsys.ErrIsSymlink},
	}
	for _, c := range cases {
		t.Run(c.link, func(t *testing.T) {
			f := newFolder(t, Policy{Type: Trashcan})
			outside := t.TempDir()
			p := filepath.Join(f.dir, filepath.FromSlash(c.link))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
			f.write("sub/f.txt", "x")
			if err := f.a.Save("sub/f.txt", t0); !errors.Is(err, c.want) {
				t.Fatalf("Save = %v, want %v", err, c.want)
			}
			if f.read("sub/f.txt") != "x" {
				t.Fatal("the file moved")
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Fatalf("Save wrote outside the folder: %v", entries)
			}
		})
	}

	// A symlink at the very name Save would pick is skipped, not replaced
	// or followed.
	f := newFolder(t, Policy{Type: Trashcan})
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.dir, Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(f.dir, Dir, "f~20260102-030405.txt")); err != nil {
		t.Fatal(err)
	}
	f.saveAt("f.txt", "mine", t0)
	if got := ids(f.list("")); !slices.Equal(got, []string{"f~20260102-030405-2.txt"}) {
		t.Fatalf("List = %q, want only the real version", got)
	}
	if b, _ := os.ReadFile(target); string(b) != "outside" {
		t.Fatalf("the symlink's target changed: %q", b)
	}
}

func TestForeignFilesLeftAlone(t *testing.T) {
	foreign := []string{
		"README",
		"notes~2026.txt",
		"b~20261301-000000.txt",   // month 13
		"b~20260102-030405-1.txt", // counters start at 2
		"b~20260102-030405-02.txt",
		"b~20260102-3040500.txt",
		"~20260102-030405.txt", // no stem
		"sub/" + fsys.TempPrefix + "x~20260102-030405",
		"sub/.lockstep~20260102-030405",
	}
	f := newFolder(t, Policy{Type: Simple, Keep: 1})
	for _, name := range foreign {
		f.write(Dir+"/"+name, "foreign")
	}
	f.saveAt("sub/b.txt", "1", t0)
	f.saveAt("sub/b.txt", "2", t0.Add(time.Hour))
	if got := ids(f.list("")); !slices.Equal(got, []string{"sub/b~20260102-040405.txt", "sub/b~20260102-030405.txt"}) {
		t.Fatalf("List = %q", got)
	}
	removed, err := f.a.Clean(t0.Add(2 * time.Hour))
	if err != nil || !slices.Equal(ids(removed), []string{"sub/b~20260102-030405.txt"}) {
		t.Fatalf("Clean = %q, %v", ids(removed), err)
	}
	for _, name := range foreign {
		if !f.exists(Dir + "/" + name) {
			t.Errorf("Clean removed the foreign file %s", name)
		}
	}
}

// TestReadsDoNotFollowLinks: a symlink in the archive pointing elsewhere
// in the folder does not make files there look like versions.
func TestReadsDoNotFollowLinks(t *testing.T) {
	f := newFolder(t, Policy{Type: Trashcan, Days: 1})
	f.write("elsewhere/versions/x~20260102-030405", "not a version")
	if err := os.MkdirAll(filepath.Join(f.dir, Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../elsewhere/versions", filepath.Join(f.dir, Dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if vs := f.list(""); len(vs) != 0 {
		t.Fatalf("List(\"\") = %+v", vs)
	}
	if vs, err := f.a.List("sub/x"); !errors.Is(err, fsys.ErrSymlinkParent) {
		t.Fatalf("List(sub/x) = %+v, %v; want ErrSymlinkParent", vs, err)
	}
	if err := f.a.Restore("sub/x~20260102-030405", "y"); !errors.Is(err, fsys.ErrSymlinkParent) {
		t.Fatalf("Restore through a link = %v, want ErrSymlinkParent", err)
	}
	if f.exists("y") {
		t.Fatal("Restore through a link wrote the destination")
	}

	// The whole internal directory as a link.
	g := newFolder(t, Policy{Type: Trashcan, Days: 1})
	g.write("elsewhere/versions/x~20260102-030405", "not a version")
	if err := os.Symlink("elsewhere", filepath.Join(g.dir, fsys.InternalDir)); err != nil {
		t.Fatal(err)
	}
	if vs, err := g.a.List(""); !errors.Is(err, fsys.ErrSymlinkParent) {
		t.Fatalf("List = %+v, %v; want ErrSymlinkParent", vs, err)
	}
	if removed, err := g.a.Clean(t0.Add(10 * day)); !errors.Is(err, fsys.ErrSymlinkParent) || len(removed) != 0 {
		t.Fatalf("Clean = %+v, %v; want ErrSymlinkParent", removed, err)
	}
	if g.read("elsewhere/versions/x~20260102-030405") != "not a version" {
		t.Fatal("the file behind the link changed")
	}
}
