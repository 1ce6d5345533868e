package scan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"lockstep/sync/fsys"
	"lockstep/test/testutil"
)

// watchTimeout is generous: tests assert on what arrives, not when.
const watchTimeout = 20 * time.Second

// watching runs a Watcher on root and collects its batches.
type watching struct {
	t       *testing.T
	w       *Watcher
	batches chan []string
	seen    map[string]bool
	all     [][]string
	flushes int
	mu      sync.Mutex
	errs    []error
}

func startWatcher(t *testing.T, root string, ignore func(string, bool) bool, setup func(*Watcher)) *watching {
	t.Helper()
	w, err := NewWatcher(root, ignore, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	wt := &watching{t: t, w: w, batches: make(chan []string, 1000), seen: map[string]bool{}}
	w.OnError = func(err error) {
		wt.mu.Lock()
		wt.errs = append(wt.errs, err)
		wt.mu.Unlock()
	}
	if setup != nil {
		setup(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- w.Serve(ctx) }()
	go func() {
		for b := range w.Changes() {
			wt.batches <- b
		}
		close(wt.batches)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		for range wt.batches { // Changes is closed when Serve returns
		}
	})
	// Serve adds its watches when it starts: touch a file until it is
	// seen, which proves they are in place.
	testutil.Eventually(t, watchTimeout, "the watcher to report a touched file", func() bool {
		wt.touch(root, ".ready")
		select {
		case b := <-wt.batches:
			for _, p := range b {
				wt.seen[p] = true
			}
		case <-time.After(200 * time.Millisecond):
		}
		return wt.seen[".ready"]
	})
	return wt
}

func (wt *watching) touch(root, name string) {
	wt.t.Helper()
	writeFile(wt.t, root, name, []byte(time.Now().String()), 0o644)
}

// waitFor reads batches until every name was seen, checking each batch.
func (wt *watching) waitFor(names ...string) {
	wt.t.Helper()
	deadline := time.After(watchTimeout)
	for {
		missing := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return wt.seen[n] })
		if len(missing) == 0 {
			return
		}
		select {
		case b, ok := <-wt.batches:
			if !ok {
				wt.t.Fatalf("Changes closed while waiting for %q", missing)
			}
			checkBatch(wt.t, b)
			wt.all = append(wt.all, b)
			for _, p := range b {
				wt.seen[p] = true
			}
		case <-deadline:
			wt.t.Fatalf("no change reported for %q; batches so far: %q", missing, wt.all)
		}
	}
}

// checkBatch checks that a batch is sorted, non-empty and minimal.
func checkBatch(t *testing.T, b []string) {
	t.Helper()
	if len(b) == 0 {
		t.Fatal("empty batch")
	}
	if !slices.Equal(minimalPaths(b), b) {
		t.Fatalf("batch %q is not minimal and sorted", b)
	}
}

func TestWatcher(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "sub/existing", []byte("x"), 0o644)
	writeFile(t, root, "sub/deeper/old", []byte("x"), 0o644)
	writeFile(t, root, "logs/a.log", []byte("x"), 0o644)
	m, err := ParseIgnore(strings.NewReader("*.log\nlogs/\n"))
	if err != nil {
		t.Fatal(err)
	}
	wt := startWatcher(t, root, m.Match, nil)

	wt.touch(root, "a.txt")
	wt.waitFor("a.txt")

	// Modify in existing nested directories.
	f, err := os.OpenFile(filepath.Join(root, "sub/deeper/old"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("more")
	f.Close()
	wt.waitFor("sub/deeper/old")

	// Remove and rename.
	wt.flush(root)
	delete(wt.seen, "a.txt")
	os.Remove(filepath.Join(root, "a.txt"))
	wt.waitFor("a.txt")
	os.Rename(filepath.Join(root, "sub/existing"), filepath.Join(root, "sub/renamed"))
	wt.waitFor("sub/existing", "sub/renamed")

	// A new nested directory with a file in it is reported (as itself or
	// the file); later changes deep inside it are seen: it is watched.
	writeFile(t, root, "new/deep/er/f", []byte("x"), 0o644)
	wt.waitForAny("new", "new/deep", "new/deep/er", "new/deep/er/f")
	// The batch above was sent after the Create of "new" was handled,
	// which added the watches of new/...
	wt.touch(root, "new/deep/er/f2")
	wt.waitFor("new/deep/er/f2")

	// A renamed directory is watched under its new name.
	os.Rename(filepath.Join(root, "sub"), filepath.Join(root, "moved"))
	wt.waitFor("sub", "moved")
	wt.touch(root, "moved/deeper/in-moved")
	wt.waitFor("moved/deeper/in-moved")

	// Temp files, the internal directory and ignored names never appear.
	wt.touch(root, ".lockstep-tmp-123")
	wt.touch(root, "new/.lockstep-tmp-456")
	wt.touch(root, ".lockstep/versions/x")
	wt.touch(root, "x.log")
	wt.touch(root, "logs/b")
	wt.touch(root, "sentinel")
	wt.waitFor("sentinel")
	for p := range wt.seen {
		if strings.Contains(p, ".lockstep") || strings.HasSuffix(p, ".log") || strings.HasPrefix(p, "logs") {
			t.Errorf("reported %q", p)
		}
	}
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if len(wt.errs) != 0 {
		t.Errorf("errors: %v", wt.errs)
	}
}

// flush makes sure every earlier event was reported: events arrive in
// order, so once a new file is reported, so is everything before it.
func (wt *watching) flush(root string) {
	wt.t.Helper()
	wt.flushes++
	name := fmt.Sprintf("flush-%d", wt.flushes)
	wt.touch(root, name)
	wt.waitFor(name)
}

// waitForAny reads batches until one of names was seen.
func (wt *watching) waitForAny(names ...string) {
	wt.t.Helper()
	deadline := time.After(watchTimeout)
	for !slices.ContainsFunc(names, func(n string) bool { return wt.seen[n] }) {
		select {
		case b := <-wt.batches:
			checkBatch(wt.t, b)
			for _, p := range b {
				wt.seen[p] = true
			}
		case <-deadline:
			wt.t.Fatalf("none of %q reported", names)
		}
	}
}

// TestWatcherOverflow: lost events mean "rescan everything".
func TestWatcherOverflow(t *testing.T) {
	root := t.TempDir()
	wt := startWatcher(t, root, nil, nil)
	wt.touch(root, "a")
	wt.w.q.push(nil, fmt.Errorf("wrapped: %w", fsnotify.ErrEventOverflow))
	wt.waitFor("")
	if !slices.ContainsFunc(wt.all, func(b []string) bool { return slices.Equal(b, []string{""}) }) {
		t.Errorf("batches %q: want one that is [\"\"]", wt.all)
	}
	// Other errors are reported, not fatal.
	wt.w.q.push(nil, errors.New("something odd"))
	wt.touch(root, "b")
	wt.waitFor("b")
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if len(wt.errs) != 1 || !strings.Contains(wt.errs[0].Error(), "something odd") {
		t.Errorf("errors: %v", wt.errs)
	}
}

// TestWatcherLimit: when the system refuses watches, the error goes to
// OnError and the watcher keeps serving what it watches.
func TestWatcherLimit(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "a/x", nil, 0o644)
	writeFile(t, root, "b/x", nil, 0o644)
	wt := startWatcher(t, root, nil, func(w *Watcher) {
		w.addWatch = func(p string) error {
			if filepath.Base(p) == "b" {
				return fmt.Errorf("%q: %w", p, syscall.ENOSPC)
			}
			return w.fw.Add(p)
		}
	})
	wt.touch(root, "a/y")
	wt.waitFor("a/y")
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if len(wt.errs) != 1 || !errors.Is(wt.errs[0], ErrWatchLimit) {
		t.Errorf("errors: %v", wt.errs)
	}
}

func TestNewWatcherErrors(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "file", nil, 0o644)
	for _, p := range []string{filepath.Join(root, "missing"), filepath.Join(root, "file")} {
		if _, err := NewWatcher(p, nil, 0); err == nil {
			t.Errorf("NewWatcher(%s) succeeded", p)
		}
	}
	w, err := NewWatcher(root, nil, 0)
	if err != nil || w.delay != DefaultDelay {
		t.Errorf("default delay: %v %v", w, err)
	}
}

// TestWatcherBuiltinIgnored: without an ignore function, the internal
// directory and temp files are still dropped.
func TestWatcherBuiltinIgnored(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, ".lockstep/versions/old", nil, 0o644)
	wt := startWatcher(t, root, nil, nil)
	wt.touch(root, ".lockstep-tmp-1")
	wt.touch(root, "dir/.lockstep-tmp-2")
	wt.touch(root, ".lockstep/versions/new")
	wt.touch(root, "sentinel")
	wt.waitFor("sentinel", "dir")
	for p := range wt.seen {
		if strings.Contains(p, ".lockstep") {
			t.Errorf("reported %q", p)
		}
	}
}

// TestWatcherRootNamedLikeTemp: a folder whose own name looks like a temp
// file's still has the events of its root reported (they are dropped only
// for the temp files in it).
func TestWatcherRootNamedLikeTemp(t *testing.T) {
	root := filepath.Join(t.TempDir(), fsys.TempPrefix+"root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	wt := startWatcher(t, root, nil, nil)
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	wt.waitFor("")
}
