package fsys

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpenBeneath: the one-call open takes plain names and refuses every
// symlink on the way and every way out, leaving those to the careful path.
func TestOpenBeneath(t *testing.T) {
	r, dir := openRoot(t)
	if r.dir == nil {
		t.Fatal("the root has no directory for the fast path")
	}
	outside := t.TempDir()
	for name, data := range map[string]string{"a/f": "in", "f": "top"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("out"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"l": "f", "ld": "a", "out": outside, "outf": filepath.Join(outside, "secret")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"f", "a/f", "a", "."} {
		f := openBeneath(r.dir, name, anyType)
		if f == nil {
			t.Errorf("%s: not opened", name)
			continue
		}
		f.Close()
	}
	for _, name := range []string{"l", "ld/f", "out/secret", "outf", "../root/f", "a/../../root/f", "missing"} {
		if f := openBeneath(r.dir, name, anyType); f != nil {
			f.Close()
			t.Errorf("%s: opened", name)
		}
	}
	// Through Open, the refused ones behave as before: a final symlink is
	// refused, a symlinked directory inside the folder is followed.
	if _, err := r.Open("l"); err == nil {
		t.Error("Open followed a final symlink")
	}
	f, err := r.Open("ld/f")
	if err != nil {
		t.Fatalf("Open(ld/f): %v", err)
	}
	f.Close()
	if _, err := r.Open("out/secret"); err == nil {
		t.Error("Open left the folder through a symlink")
	}
}

// TestOpenFIFO: a FIFO where a file is asked for is refused at once, not
// waited on until some writer opens it.
func TestOpenFIFO(t *testing.T) {
	r, dir := openRoot(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := r.Open("fifo")
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO was opened as a file")
		}
	case <-time.After(5 * time.Second):
		// Unblock the open before failing, so the test can end.
		if w, err := os.OpenFile(filepath.Join(dir, "fifo"), os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("opening a FIFO blocked")
	}
	if f := openBeneath(r.dir, "fifo", anyType); f != nil {
		f.Close()
		t.Fatal("openBeneath returned a FIFO")
	}
}

// anyType takes every file type, to see what openBeneath itself refuses.
func anyType(fs.FileMode) error { return nil }

// TestWritesBeneath: the one-call writes do the work themselves on plain
// names (so Root's writes do not quietly go the long way), and refuse a
// symlink on the way, leaving it to the careful path.
func TestWritesBeneath(t *testing.T) {
	h := newHostileTree(t)
	dir := h.r.dir
	if dir == nil {
		t.Fatal("the root has no directory for the fast path")
	}
	f, ok := createBeneath(dir, "d/new")
	if !ok {
		t.Fatal("createBeneath(d/new) refused")
	}
	f.Close()
	if _, ok := createBeneath(dir, "d/new"); ok {
		t.Error("createBeneath took an existing name")
	}
	// The one-call chmod needs fchmodat2 (Linux 6.6); without it, it
	// must refuse, and the careful path does the work.
	fchmodat2 := unix.Fchmodat(unix.AT_FDCWD, filepath.Join(h.dir, "src"), 0o644, unix.AT_SYMLINK_NOFOLLOW) == nil
	if got := chmodBeneath(dir, "d/new", 0o640); got != fchmodat2 {
		t.Errorf("chmodBeneath(d/new) = %v, want %v (fchmodat2 here: %v)", got, fchmodat2, fchmodat2)
	}
	if !fchmodat2 {
		if err := h.r.Chmod("d/new", 0o640); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink is left to the careful path, which checks and then acts
	// within the folder: the one call has no way to leave it alone.
	if chmodBeneath(dir, "abs", 0o700) || chmodBeneath(dir, "d/l", 0o700) {
		t.Error("chmodBeneath acted on a symlink")
	}
	mtime := time.Date(2021, 2, 3, 4, 5, 6, 7, time.UTC)
	if !chtimesBeneath(dir, "d/new", mtime) {
		t.Error("chtimesBeneath(d/new) refused")
	}
	fi, err := os.Lstat(filepath.Join(h.dir, "d/new"))
	if err != nil || fi.Mode() != 0o640 || !fi.ModTime().Equal(mtime) {
		t.Errorf("d/new is %v, %v", fi, err)
	}
	if !renameBeneath(dir, "d/new", "moved") {
		t.Error("renameBeneath(d/new, moved) refused")
	}
	if !removeBeneath(dir, "moved") {
		t.Error("removeBeneath(moved) refused")
	}
	if err := os.Mkdir(filepath.Join(h.dir, "d/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !removeBeneath(dir, "d/empty") {
		t.Error("removeBeneath(d/empty) refused a directory")
	}
	if got := entries(t, filepath.Join(h.dir, "d")); !slices.Equal(got, []string{"l"}) {
		t.Errorf("d holds %v", got)
	}

	for link := range h.links() {
		name := link + "/" + h.leaf
		if f, ok := createBeneath(dir, name); ok {
			f.Close()
			t.Errorf("createBeneath(%s) went through the link", name)
		}
		if chmodBeneath(dir, name, 0o777) || chtimesBeneath(dir, name, mtime) || removeBeneath(dir, name) ||
			renameBeneath(dir, "src", name) || renameBeneath(dir, name, "x") {
			t.Errorf("a write to %s went through the link", name)
		}
	}
	for _, name := range []string{"../x", "sub/../../x"} {
		if f, ok := createBeneath(dir, name); ok {
			f.Close()
			t.Errorf("createBeneath(%s) left the folder", name)
		}
	}
	h.check(t, true)
}
