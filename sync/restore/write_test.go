package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"lockstep/storage/syncahead"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// writeSetup seals one small file per name, each holding its name, and
// returns the plan of writing them, a writer's source of their chunks,
// and an empty target directory opened as a Root.
func writeSetup(t *testing.T, names []string) (*plan, chunkSource, string, *fsys.Root) {
	t.Helper()
	files := make([][]byte, len(names))
	for i, name := range names {
		files[i] = []byte(name)
	}
	return writeSetupData(t, names, files)
}

// writeSetupData is writeSetup with the files' data given.
func writeSetupData(t *testing.T, names []string, files [][]byte) (*plan, chunkSource, string, *fsys.Root) {
	t.Helper()
	s := newSealer(t)
	for i, name := range names {
		data := files[i]
		s.add(index.Record{Name: name, Mode: 0o644, ModTime: 1, Size: int64(len(data)), Blocks: s.content(data), Version: vec(1, originA)}, originA, uint64(i+1))
	}
	c := newCollector(s.keys, testFolder, quiet)
	for _, sr := range s.log {
		c.add(sr)
	}
	dir := t.TempDir()
	root, err := fsys.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return c.plan(), &memSource{keys: s.keys, chunks: s.chunks}, dir, root
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestRenameFailureLeavesNoTemporaries fails one rename among many run in
// parallel: the recovery reports it, counts exactly the files that reached
// their names, and leaves no temporary file behind.
func TestRenameFailureLeavesNoTemporaries(t *testing.T) {
	const files = 60
	var names []string
	for i := range files {
		names = append(names, fmt.Sprintf("d%d/f%02d", i%3, i))
	}
	p, src, dir, root := writeSetup(t, names)
	boom := errors.New("boom")
	faulty := &fsys.Faulty{FS: root}
	faulty.FailOp(fsys.OpRename, 25, boom)

	w := newWriter(faulty, src, quiet, nil)
	res, err := w.write(context.Background(), p)
	if !errors.Is(err, boom) {
		t.Fatalf("write = %v, want the rename's error", err)
	}
	var found int
	for d := range 3 {
		entries, err := os.ReadDir(fmt.Sprintf("%s/d%d", dir, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := fmt.Sprintf("d%d/%s", d, e.Name())
			if !slices.Contains(names, name) {
				t.Errorf("left behind: %s", name)
				continue
			}
			if got, err := os.ReadFile(dir + "/" + name); err != nil || string(got) != name {
				t.Errorf("%s holds %q, %v", name, got, err)
			}
			found++
		}
	}
	if res.Files != found || found < 24 || found == files {
		t.Errorf("Result counts %d files, %d are in place (of %d)", res.Files, found, files)
	}
}

// cancelOnSync cancels a context at the first barrier, as a user's Ctrl-C
// landing right after the data is durable would.
type cancelOnSync struct {
	fsys.FS
	cancel context.CancelFunc
}

func (c cancelOnSync) Sync() error {
	c.cancel()
	return c.FS.Sync()
}

// TestCancelAfterBarrierStillRenames: once the data is durable, a cancel
// does not leave written files out of place behind a nil error; every
// file is renamed in.
func TestCancelAfterBarrierStillRenames(t *testing.T) {
	const files = 20
	var names []string
	for i := range files {
		names = append(names, fmt.Sprintf("f%02d", i))
	}
	p, src, dir, root := writeSetup(t, names)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWriter(cancelOnSync{FS: root, cancel: cancel}, src, quiet, nil)
	res, err := w.write(ctx, p)
	entries, rerr := os.ReadDir(dir)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil && (res.Files != files || len(entries) != files) {
		t.Fatalf("write returned nil with %d files counted and %d entries, want %d", res.Files, len(entries), files)
	}
	if err != nil && len(entries) != res.Files {
		t.Fatalf("write = %v with %d files counted and %d entries", err, res.Files, len(entries))
	}
}

// countSyncs counts the barriers made on an FS.
type countSyncs struct {
	fsys.FS
	n atomic.Int64
}

func (c *countSyncs) Sync() error {
	c.n.Add(1)
	return c.FS.Sync()
}

// TestBarriersAheadOfWrites: a recovery writing more than syncahead.Every
// bytes makes barriers in the background besides its own two (after the
// files' data, and at the end).
func TestBarriersAheadOfWrites(t *testing.T) {
	data := make([]byte, syncahead.Every+(1<<20))
	if _, err := rand.NewChaCha8([32]byte{'b'}).Read(data); err != nil {
		t.Fatal(err)
	}
	p, src, dir, root := writeSetupData(t, []string{"big"}, [][]byte{data})
	fs := &countSyncs{FS: root}
	w := newWriter(fs, src, quiet, nil)
	if _, err := w.write(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(dir + "/big"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("big: %d bytes, %v", len(got), err)
	}
	if n := fs.n.Load(); n < 3 {
		t.Errorf("%d barriers, want one in the background besides the writer's two", n)
	}
}
