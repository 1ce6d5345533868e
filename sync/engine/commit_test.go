package engine

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/sync/index"
)

// TestConflictCopiesInOneSecond: conflict copies of one file made in the
// same second never replace each other.
func TestConflictCopiesInOneSecond(t *testing.T) {
	f := idleFolder(t)
	dir := f.config().Path
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var names []string
	for i, content := range []string{"first", "second", "third"} {
		if err := os.WriteFile(filepath.Join(dir, "doc.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		cname, err := f.keepConflict("doc.txt", "doc.txt", crypt.ShortID(7), now)
		if err != nil {
			t.Fatalf("conflict %d: %v", i+1, err)
		}
		names = append(names, cname)
	}
	for i, content := range []string{"first", "second", "third"} {
		got, err := os.ReadFile(filepath.Join(dir, names[i]))
		if err != nil || string(got) != content {
			t.Errorf("conflict copy %d (%s) = %q, %v; want %q", i+1, names[i], got, err, content)
		}
	}
	if names[0] == names[1] || names[1] == names[2] || names[0] == names[2] {
		t.Fatalf("conflict names repeat: %v", names)
	}
}

// raceNodes are two connected engines sharing folder "f", with x.txt
// synced to b; b's puller calls write just before it replaces or deletes
// x.txt.
func raceNodes(t *testing.T, write func(dir, name string)) (dirA, dirB string) {
	t.Helper()
	return raceNodesOn(t, "x.txt", write)
}

// raceNodesOn is raceNodes with write called just before b's puller puts
// the file trigger in place, replaces or deletes it.
func raceNodesOn(t *testing.T, trigger string, write func(dir, name string)) (dirA, dirB string) {
	t.Helper()
	dirA, dirB = t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dirA, "x.txt"), []byte("from a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idA, idB := crypt.DeviceID{9}, crypt.DeviceID{1}
	b := startEngineWith(t, idB, 0, dirB, db.Device{ID: idA.String()})
	a := startEngineWith(t, idA, 0, dirA, db.Device{ID: idB.String()})
	connect(t, a, b)
	waitFor(t, "b to get x.txt", func() bool {
		got, _ := os.ReadFile(filepath.Join(dirB, "x.txt"))
		st, _ := b.FolderStatus("f")
		return string(got) == "from a\n" && st.NeedFiles == 0 && st.State == StateIdle
	})
	fb := b.folder("f")
	var once bool // the folder's goroutine's only
	hook := func(name string) {
		if name == trigger && !once {
			once = true
			write(dirB, name)
		}
	}
	fb.beforeReplace.Store(&hook)
	return dirA, dirB
}

// TestLocalWriteBeforeReplaceKept: a local write that lands after the
// puller checked the file and before it replaces it becomes a conflict
// copy; the peer's version takes the name.
func TestLocalWriteBeforeReplaceKept(t *testing.T) {
	dirA, dirB := raceNodes(t, func(dir, name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("b's edit, not scanned yet\n"), 0o644); err != nil {
			t.Error(err)
		}
	})
	if err := os.WriteFile(filepath.Join(dirA, "x.txt"), []byte("a's new version\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's edit kept beside a's version", func() bool {
		got, _ := os.ReadFile(filepath.Join(dirB, "x.txt"))
		return string(got) == "a's new version\n" && findContent(t, dirB, "x.sync-conflict-", "b's edit, not scanned yet\n")
	})
}

// TestLocalWriteBeforeDeleteKept: a local write that lands after the
// puller checked a file the peer deleted, and before it deletes it, keeps
// the file.
func TestLocalWriteBeforeDeleteKept(t *testing.T) {
	dirA, _ := raceNodes(t, func(dir, name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("b's edit, not scanned yet\n"), 0o644); err != nil {
			t.Error(err)
		}
	})
	if err := os.Remove(filepath.Join(dirA, "x.txt")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's edit to survive and reach a", func() bool {
		got, _ := os.ReadFile(filepath.Join(dirA, "x.txt"))
		return string(got) == "b's edit, not scanned yet\n" || findContent(t, dirA, "x.sync-conflict-", "b's edit, not scanned yet\n")
	})
}

// findContent reports whether a file in dir whose name starts with prefix
// holds content.
func findContent(t *testing.T, dir, prefix, content string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			if got, _ := os.ReadFile(filepath.Join(dir, e.Name())); string(got) == content {
				return true
			}
		}
	}
	return false
}

// TestSameBytesNoConflict: two devices that hold the same file, chunked
// with different polynomials and with concurrent versions, end with one
// file and no conflict copy: identical content is never a conflict.
func TestSameBytesNoConflict(t *testing.T) {
	data := make([]byte, 6<<20)
	if _, err := rand.NewChaCha8([32]byte{'s'}).Read(data); err != nil {
		t.Fatal(err)
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	for i, dir := range []string{dirA, dirB} {
		p := filepath.Join(dir, "same.bin")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(2026, 1, 2, 3, 4, 5+i, 0, time.UTC) // differing mtimes too
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	idA, idB := crypt.DeviceID{9}, crypt.DeviceID{1}
	b := startEngineWith(t, idB, randomPolynomial(t), dirB, db.Device{ID: idA.String()})
	a := startEngineWith(t, idA, randomPolynomial(t), dirA, db.Device{ID: idB.String()})
	waitFor(t, "both to scan their file", func() bool {
		sa, _ := a.FolderStatus("f")
		sb, _ := b.FolderStatus("f")
		return sa.LocalFiles == 1 && sb.LocalFiles == 1
	})
	connect(t, a, b)
	waitFor(t, "a and b to agree on one version", func() bool {
		la, okA := a.folder("f").set.Local("same.bin")
		lb, okB := b.folder("f").set.Local("same.bin")
		ra, okRA := a.folder("f").set.Remote(idB, "same.bin")
		rb, okRB := b.folder("f").set.Remote(idA, "same.bin")
		return okA && okB && okRA && okRB && la.Version.Compare(lb.Version) == index.Equal &&
			ra.Version.Compare(lb.Version) == index.Equal && rb.Version.Compare(la.Version) == index.Equal
	})
	for _, dir := range []string{dirA, dirB} {
		if findContent(t, dir, "same.sync-conflict-", string(data)) {
			t.Fatalf("a conflict copy of identical content in %s", dir)
		}
	}
}

// TestLocalCreateBeforePlaceKept: a file created locally under the name of
// a new file being pulled, after the puller wrote it and before it is put
// in place, is never overwritten: both versions survive.
func TestLocalCreateBeforePlaceKept(t *testing.T) {
	dirA, dirB := raceNodesOn(t, "new.txt", func(dir, name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("b's own new.txt\n"), 0o644); err != nil {
			t.Error(err)
		}
	})
	if err := os.WriteFile(filepath.Join(dirA, "new.txt"), []byte("a's new.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both versions of new.txt on b", func() bool {
		return findContent(t, dirB, "new", "b's own new.txt\n") && findContent(t, dirB, "new", "a's new.txt\n")
	})
}

// TestFolderStartsStarting: a folder shows "starting" until its first
// scan begins, not "idle": `folder add --wait` took an idle folder for one
// scanned, and returned before the scan with no files.
func TestFolderStartsStarting(t *testing.T) {
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	e := newWired(crypt.DeviceID{9}, d)
	f, err := newFolder(context.Background(), e, db.Folder{ID: "f", Path: t.TempDir(), Type: db.SendReceive})
	if err != nil {
		t.Fatal(err)
	}
	defer f.fs.Close()
	f.mu.Lock()
	st := f.shownState()
	f.mu.Unlock()
	if st != StateStarting {
		t.Fatalf("a new folder's state is %q, want %q", st, StateStarting)
	}
}

// TestFolderThatCannotStartShowsWhy: a folder whose path can't be made
// shows the error in its status, not a folder forever starting (or, before
// "starting", idle and empty).
func TestFolderThatCannotStartShowsWhy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.PutFolder(ctx, db.Folder{ID: "f", Path: filepath.Join(blocker, "docs"), Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	e := newWired(crypt.DeviceID{9}, d)
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	var st FolderStatus
	waitFor(t, "the folder's status", func() bool {
		var ok bool
		st, ok = e.FolderStatus("f")
		return ok
	})
	if st.State != StateError || !strings.Contains(st.Error, "not a directory") {
		t.Fatalf("status of a folder that can't start: %q, %q", st.State, st.Error)
	}
}

// TestScanFailureShownAtOnce: a failed scan takes the folder from scanning
// to error in one change; it used to pass through idle, which `folder add
// --wait` took for a scan done well.
func TestScanFailureShownAtOnce(t *testing.T) {
	dir := t.TempDir()
	e := startEngine(t, dir)
	waitFor(t, "the first scan", func() bool {
		st, _ := e.FolderStatus("f")
		return st.State == StateIdle
	})
	e.db.Close() // the scan's records can't be stored
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := e.opts.Events.Latest()
	e.folder("f").requestScan(nil)
	waitFor(t, "the scan to fail", func() bool {
		st, _ := e.FolderStatus("f")
		return st.State == StateError && strings.HasPrefix(st.Error, "scan: ")
	})
	evs, err := e.opts.Events.Since(after)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, ev := range evs {
		if c, ok := ev.Data.(events.FolderStateChanged); ok && c.Folder == "f" {
			states = append(states, c.State)
		}
	}
	if !slices.Equal(states, []string{StateScanning, StateError}) {
		t.Fatalf("states after the failing scan: %v, want scanning then error", states)
	}
}

// A batch takes in items that arrive within the window, not only those
// queued at once, and a closed channel ends it at once: the last items
// of a pull (a single edit's one) are placed without waiting.
func TestGatherBatches(t *testing.T) {
	in := make(chan done)
	go func() {
		for range 40 {
			in <- done{}
			time.Sleep(time.Millisecond)
		}
		close(in)
	}()
	// Items come a millisecond apart: the window holds them all
	// (taking only what was queued made batches of one).
	start := time.Now()
	batch := gather(in, []done{<-in}, time.Minute)
	if len(batch) != 40 {
		t.Fatalf("batch of %d items, want all 40 that came within the window", len(batch))
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("the closed channel kept the batch waiting %v", waited)
	}

	// Nothing arrives: the window ends the batch.
	idle := make(chan done)
	batch = gather(idle, []done{{}}, 10*time.Millisecond)
	if len(batch) != 1 {
		t.Fatalf("batch of %d items, want 1", len(batch))
	}

	// A full batch returns at once.
	full := make(chan done, finisherBatch+10)
	for range finisherBatch + 10 {
		full <- done{}
	}
	batch = gather(full, nil, time.Minute)
	if len(batch) != finisherBatch {
		t.Fatalf("batch of %d items, want %d", len(batch), finisherBatch)
	}
}
