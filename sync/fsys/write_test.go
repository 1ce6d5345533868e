package fsys

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestSymlinkStoresTargetAsIs(t *testing.T) {
	r, dir := openRoot(t)
	for i, target := range []string{"../../etc/passwd", "/etc/shadow", "rel/y", "with space", "..", "dangling/ü"} {
		name := string(rune('a' + i))
		if err := r.Symlink(target, name); err != nil {
			t.Fatalf("Symlink(%q): %v", target, err)
		}
		got, err := r.Readlink(name)
		if err != nil || got != target {
			t.Errorf("Readlink = %q, %v; want %q", got, err, target)
		}
		if osGot, _ := os.Readlink(filepath.Join(dir, name)); osGot != target {
			t.Errorf("on disk the link is %q, want %q", osGot, target)
		}
		fi, err := r.Lstat(name)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Lstat = %v, %v", fi, err)
		}
	}
	if err := r.Symlink("x", "a"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Symlink over an existing name: %v", err)
	}
}

func TestChmodChtimes(t *testing.T) {
	r, dir := openRoot(t)
	writeOS(t, filepath.Join(dir, "f"), "x")
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlinkOS(t, "f", filepath.Join(dir, "l"))
	symlinkOS(t, "nowhere", filepath.Join(dir, "dangling"))
	t1 := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
	t2 := time.Date(2011, 2, 3, 4, 5, 6, 0, time.UTC)

	for name, mode := range map[string]fs.FileMode{"f": 0o600, "d": 0o700} {
		if err := r.Chmod(name, mode); err != nil {
			t.Fatal(err)
		}
		if err := r.Chtimes(name, t1); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != mode || !fi.ModTime().Equal(t1) {
			t.Errorf("%s: mode %v mtime %v, want %v %v", name, fi.Mode(), fi.ModTime(), mode, t1)
		}
	}
	if err := r.Chmod("f", 0o4755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "f")); fi.Mode() != 0o755 {
		t.Errorf("Chmod applied more than permission bits: %v", fi.Mode())
	}

	// Symlinks: Chmod does nothing, Chtimes sets the link's own time.
	if err := r.Chmod("l", 0o777); err != nil {
		t.Fatal(err)
	}
	if err := r.Chtimes("l", t2); err != nil {
		t.Fatal(err)
	}
	if err := r.Chtimes("dangling", t2); err != nil {
		t.Fatalf("Chtimes of a dangling symlink: %v", err)
	}
	fi, _ := os.Lstat(filepath.Join(dir, "f"))
	if fi.Mode() != 0o755 || !fi.ModTime().Equal(t1) {
		t.Errorf("the link's target changed: %v %v", fi.Mode(), fi.ModTime())
	}
	if li, _ := os.Lstat(filepath.Join(dir, "l")); !li.ModTime().Equal(t2) {
		t.Errorf("link mtime %v, want %v", li.ModTime(), t2)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Chtimes created the dangling link's target: %v", err)
	}
	if err := r.Chmod("missing", 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Chmod(missing) = %v", err)
	}
}

func TestRemove(t *testing.T) {
	r, dir := openRoot(t)
	writeOS(t, filepath.Join(dir, "f"), "x")
	writeOS(t, filepath.Join(dir, "target"), "keep")
	symlinkOS(t, "target", filepath.Join(dir, "l"))
	if err := os.MkdirAll(filepath.Join(dir, "full/inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f", "l", "empty"} {
		if err := r.Remove(name); err != nil {
			t.Errorf("Remove(%q) = %v", name, err)
		}
	}
	if err := r.Remove("full"); err == nil {
		t.Error("Remove of a non-empty directory succeeded")
	}
	if err := r.Remove("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove(missing) = %v", err)
	}
	if err := r.Remove("."); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Remove(.) = %v", err)
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"full", "target"}) {
		t.Errorf("left %v, want [full target]", got)
	}
	if got := entries(t, filepath.Join(dir, "full")); !slices.Equal(got, []string{"inner"}) {
		t.Errorf("full holds %v", got)
	}
}

func TestRenameReplaces(t *testing.T) {
	r, dir := openRoot(t)
	writeOS(t, filepath.Join(dir, "new"), "new")
	writeOS(t, filepath.Join(dir, "old"), "old")
	writeOS(t, filepath.Join(dir, "target"), "target")
	symlinkOS(t, "target", filepath.Join(dir, "link"))
	if err := os.MkdirAll(filepath.Join(dir, "dir/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.Rename("new", "old"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "old")); string(b) != "new" {
		t.Errorf("old holds %q", b)
	}
	// Renaming over a symlink replaces the link, not its target.
	if err := r.Rename("old", "link"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "target")); string(b) != "target" {
		t.Errorf("the link's target was written: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "link")); !fi.Mode().IsRegular() {
		t.Errorf("link is %v, want a regular file", fi.Mode())
	}
	if err := r.Rename("link", "dir"); err == nil {
		t.Error("Rename over a non-empty directory succeeded")
	}
}

func TestMkdirAll(t *testing.T) {
	r, dir := openRoot(t)
	if err := r.MkdirAll("a/b/c", 0o750); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "a/b", "a/b/c"} {
		fi, err := os.Lstat(filepath.Join(dir, d))
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: %v %v", d, fi, err)
		}
	}
	writeOS(t, filepath.Join(dir, "file"), "x")
	symlinkOS(t, "a", filepath.Join(dir, "link"))
	if err := r.MkdirAll("file/x", 0o755); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("MkdirAll through a file: %v", err)
	}
	if err := r.MkdirAll("file", 0o755); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("MkdirAll on a file: %v", err)
	}
	if err := r.MkdirAll("link", 0o755); !errors.Is(err, ErrIsSymlink) {
		t.Errorf("MkdirAll on a symlink: %v", err)
	}
	if err := r.MkdirAll("link/new", 0o755); !errors.Is(err, ErrSymlinkParent) {
		t.Errorf("MkdirAll through a symlink: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a/new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("MkdirAll wrote through the symlink: %v", err)
	}
}

// TestStructuralNames: every FS method refuses escaping names, and accepts
// the engine's own internal and temp names that ValidName refuses.
func TestStructuralNames(t *testing.T) {
	r, dir := openRoot(t)
	writeOS(t, filepath.Join(dir, "f"), "x")
	for _, name := range []string{"", "../x", "/etc/passwd", "a/../../x", "x\x00y", `..\x`, "a//b", "./f"} {
		calls := map[string]error{}
		_, calls["Lstat"] = r.Lstat(name)
		_, calls["Open"] = r.Open(name)
		_, calls["ReadDir"] = r.ReadDir(name)
		_, calls["Readlink"] = r.Readlink(name)
		_, _, calls["CreateTemp"] = r.CreateTemp(name)
		calls["Rename from"] = r.Rename(name, "g")
		calls["Rename to"] = r.Rename("f", name)
		calls["Remove"] = r.Remove(name)
		calls["MkdirAll"] = r.MkdirAll(name, 0o755)
		calls["Symlink"] = r.Symlink("t", name)
		calls["Chmod"] = r.Chmod(name, 0o644)
		calls["Chtimes"] = r.Chtimes(name, time.Now())
		calls["SyncDir"] = r.SyncDir(name)
		_, calls["CaseConflict"] = r.CaseConflict(name)
		for call, err := range calls {
			if !errors.Is(err, ErrInvalidName) {
				t.Errorf("%s(%q) = %v, want ErrInvalidName", call, name, err)
			}
		}
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"f"}) {
		t.Errorf("folder holds %v", got)
	}
	if err := r.MkdirAll(InternalDir+"/versions", 0o755); err != nil {
		t.Fatal(err)
	}
	f, tmp, err := r.CreateTemp(InternalDir + "/versions/x")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := r.Rename(tmp, InternalDir+"/versions/x"); err != nil {
		t.Fatal(err)
	}
}

// TestRenameOntoDirectory: Rename onto an existing directory behaves the
// same whichever path the root takes: refused with an error matching
// fs.ErrExist, as os.Rename does. (The one-call path once let renameat
// replace an empty directory.)
func TestRenameOntoDirectory(t *testing.T) {
	bothPaths(t, func(t *testing.T, h *hostileTree) {
		for _, d := range []string{"a1", "b1", "a2", "d/c2", "a3"} {
			if err := os.Mkdir(filepath.Join(h.dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct{ from, to string }{{"a1", "b1"}, {"a2", "d/c2"}, {"a3", "a3"}} {
			err := h.r.Rename(c.from, c.to)
			if !errors.Is(err, fs.ErrExist) {
				t.Errorf("Rename(%s, %s) onto a directory = %v, want an error matching fs.ErrExist", c.from, c.to, err)
			}
			for _, d := range []string{c.from, c.to} {
				if fi, err := os.Lstat(filepath.Join(h.dir, d)); err != nil || !fi.IsDir() {
					t.Errorf("after Rename(%s, %s): %s is %v, %v", c.from, c.to, d, fi, err)
				}
			}
		}
		h.check(t, true)
	})
}
