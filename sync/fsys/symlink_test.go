package fsys

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostileTree is a folder whose symlinks point out of it and into it, next
// to an outside directory that must stay untouched.
type hostileTree struct {
	r       *Root
	parent  string // holds root and outside only
	dir     string // the folder
	outside string // empty, outside the folder
	leaf    string // a name unlikely to exist anywhere, even in "/"
	subTime time.Time
}

// links are the symlinks of a hostileTree: name -> target.
func (h *hostileTree) links() map[string]string {
	return map[string]string{
		"abs":   "/",
		"up":    "..",
		"upup":  "../..",
		"out":   h.outside,
		"in":    "sub",
		"dotin": "./sub",
		"d/l":   "../sub",
	}
}

func newHostileTree(t testing.TB) *hostileTree {
	t.Helper()
	parent := t.TempDir()
	h := &hostileTree{
		parent:  parent,
		dir:     filepath.Join(parent, "root"),
		outside: filepath.Join(parent, "outside"),
		leaf:    fmt.Sprintf("lockstep-fsys-test-%016x", rand.Uint64()),
		subTime: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for _, d := range []string{h.outside, h.dir + "/sub", h.dir + "/d"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sentinel := filepath.Join(h.dir, "sub", h.leaf)
	writeOS(t, sentinel, "orig")
	if err := os.Chtimes(sentinel, h.subTime, h.subTime); err != nil {
		t.Fatal(err)
	}
	writeOS(t, filepath.Join(h.dir, "src"), "src")
	for name, target := range h.links() {
		symlinkOS(t, target, filepath.Join(h.dir, name))
	}
	r, err := Open(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	h.r = r
	return h
}

// check fails t if anything outside the folder, or the sentinel in sub,
// changed.
func (h *hostileTree) check(t testing.TB, checkSub bool) {
	t.Helper()
	if got := entries(t, h.parent); !slices.Equal(got, []string{"outside", "root"}) {
		t.Errorf("the folder's parent now holds %v", got)
	}
	if got := entries(t, h.outside); len(got) != 0 {
		t.Errorf("outside now holds %v", got)
	}
	if _, err := os.Lstat("/" + h.leaf); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("/%s was created: %v", h.leaf, err)
	}
	if !checkSub {
		return
	}
	if got := entries(t, filepath.Join(h.dir, "sub")); !slices.Equal(got, []string{h.leaf}) {
		t.Errorf("sub now holds %v", got)
	}
	sentinel := filepath.Join(h.dir, "sub", h.leaf)
	fi, err := os.Lstat(sentinel)
	if err != nil || fi.Mode() != 0o644 || !fi.ModTime().Equal(h.subTime) {
		t.Errorf("sub's file changed: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(sentinel); string(b) != "orig" {
		t.Errorf("sub's file holds %q", b)
	}
}

// writes runs every write operation of r on name and returns their errors.
func writes(r *Root, name string) map[string]error {
	errs := map[string]error{}
	f, _, err := r.CreateTemp(name)
	if err == nil {
		f.Write([]byte("pwned"))
		f.Close()
	}
	errs["CreateTemp"] = err
	errs["MkdirAll"] = r.MkdirAll(name+"/deeper", 0o755)
	errs["Symlink"] = r.Symlink("target", name)
	errs["Chmod"] = r.Chmod(name, 0o777)
	errs["Chtimes"] = r.Chtimes(name, time.Now())
	errs["Rename to"] = r.Rename("src", name)
	errs["Rename from"] = r.Rename(name, "moved")
	errs["Remove"] = r.Remove(name)
	return errs
}

func TestWritesRefuseSymlinkParents(t *testing.T) {
	bothPaths(t, func(t *testing.T, h *hostileTree) {
		for link := range h.links() {
			for _, name := range []string{link + "/" + h.leaf, link + "/new/" + h.leaf} {
				for op, err := range writes(h.r, name) {
					if !errors.Is(err, ErrSymlinkParent) {
						t.Errorf("%s(%q) = %v, want ErrSymlinkParent", op, name, err)
					}
				}
			}
		}
		h.check(t, true)
		if _, err := os.Lstat(filepath.Join(h.dir, "src")); err != nil {
			t.Errorf("src was moved: %v", err)
		}
		for link, target := range h.links() {
			if got, err := os.Readlink(filepath.Join(h.dir, link)); err != nil || got != target {
				t.Errorf("link %s now %q, %v", link, got, err)
			}
		}
	})
}

// bothPaths runs fn on a hostile tree whose root takes the one-call paths
// where the system has them, and on one that always goes the careful way.
func bothPaths(t *testing.T, fn func(*testing.T, *hostileTree)) {
	for _, fast := range []bool{true, false} {
		t.Run(map[bool]string{true: "one-call", false: "careful"}[fast], func(t *testing.T) {
			h := newHostileTree(t)
			if !fast {
				h.r.dir = nil
			}
			fn(t, h)
		})
	}
}

// TestWritesOnFinalSymlink: a final symlink is acted on itself, never
// followed.
func TestWritesOnFinalSymlink(t *testing.T) {
	bothPaths(t, func(t *testing.T, h *hostileTree) {
		for _, link := range []string{"abs", "up", "out", "in", "d/l"} {
			if err := h.r.Chmod(link, 0o777); err != nil {
				t.Errorf("Chmod(%s) = %v", link, err)
			}
			if err := h.r.Chtimes(link, time.Now()); err != nil {
				t.Errorf("Chtimes(%s) = %v", link, err)
			}
			if err := h.r.MkdirAll(link, 0o755); !errors.Is(err, ErrIsSymlink) {
				t.Errorf("MkdirAll(%s) = %v", link, err)
			}
			if f, err := h.r.Open(link); !errors.Is(err, ErrIsSymlink) {
				t.Errorf("Open(%s) = %v, %v", link, f, err)
			}
			if err := h.r.Remove(link); err != nil {
				t.Errorf("Remove(%s) = %v", link, err)
			}
		}
		h.check(t, true)
		if fi, err := os.Stat(h.outside); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("outside dir changed: %v %v", fi, err)
		}
	})
}

// FuzzRootWrites runs every write operation on arbitrary names in a folder
// full of hostile symlinks: nothing outside the folder may change, and
// nothing reached through the links into sub.
func FuzzRootWrites(f *testing.F) {
	for _, s := range []string{"abs/LEAF", "up/LEAF", "abs/x", "up/x", "upup/x", "out/x", "in/x", "d/l/x", "dotin/x",
		"x", "sub/x", "../x", "/x", "in/../x", "d/../up/x", "in//x", "./in/x", "in\\x", "abs/tmp", "up/outside/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		h := newHostileTree(t)
		name = strings.ReplaceAll(name, "LEAF", h.leaf)
		writes(h.r, name)
		h.check(t, !strings.HasPrefix(name, "sub"))
	})
}
