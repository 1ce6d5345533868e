package restore

import (
	"bytes"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// Origins: trusted devices that sealed records of the test folder.
var (
	originA = crypt.DeviceID{0xa1, 1}
	originB = crypt.DeviceID{0xb2, 2}
	originC = crypt.DeviceID{0xc3, 3}
)

// makeTree creates the test folder's tree and returns its directory.
func makeTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	// Seeded, so big.bin's chunks are the same every run: random bytes
	// cut into fewer than three chunks now and then.
	big := make([]byte, 2<<20+12345)
	src := rand.NewChaCha8([32]byte{'b', 'i', 'g'})
	if _, err := src.Read(big); err != nil {
		t.Fatal(err)
	}
	entries := []struct {
		name   string
		mode   fs.FileMode
		data   []byte
		dir    bool
		target string
	}{
		{name: "hello.txt", mode: 0o640, data: []byte("hello, world\n")},
		{name: "empty", mode: 0o600, data: []byte{}},
		{name: "big.bin", mode: 0o644, data: big},
		{name: "bin", mode: 0o755, dir: true},
		{name: "bin/tool.sh", mode: 0o755, data: []byte("#!/bin/sh\necho tool\n")},
		{name: "café", mode: 0o750, dir: true},
		{name: "café/naïve ☃.txt", mode: 0o644, data: []byte("unicode names\n")},
		{name: "docs", mode: 0o750, dir: true},
		{name: "docs/readme.md", mode: 0o644, data: []byte("# readme\n")},
		{name: "emptydir", mode: 0o700, dir: true},
		{name: "ro", mode: 0o555, dir: true},
		{name: "ro/file", mode: 0o444, data: []byte("read only\n")},
		{name: "link", target: "docs/readme.md"},
		{name: "dangling", target: "../outside/nothing"},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "ro"), 0o755) })
	base := time.Date(2024, 3, 1, 12, 0, 0, 123456789, time.UTC)
	for i, e := range entries {
		p := filepath.Join(dir, filepath.FromSlash(e.name))
		var err error
		switch {
		case e.target != "":
			err = os.Symlink(e.target, p)
		case e.dir:
			err = os.Mkdir(p, 0o755)
		default:
			err = os.WriteFile(p, e.data, 0o644)
			if err == nil {
				err = os.Chmod(p, e.mode)
			}
		}
		if err == nil && e.target == "" && !e.dir {
			mt := base.Add(time.Duration(i) * time.Hour)
			err = os.Chtimes(p, mt, mt)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Directories last, deepest first, once nothing more changes them.
	for i, e := range slices.Backward(entries) {
		if !e.dir {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(e.name))
		mt := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, e.mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// compareTrees checks that got holds exactly want's entries, minus skip,
// with the same types, permissions, times, contents and link targets.
func compareTrees(t *testing.T, want, got string, skip ...string) {
	t.Helper()
	skipped := func(rel string) bool {
		for _, s := range skip {
			if rel == s || len(rel) > len(s) && rel[:len(s)+1] == s+"/" {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	err := filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == want {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		rel = filepath.ToSlash(rel)
		if skipped(rel) {
			return nil
		}
		seen[rel] = true
		wi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		gp := filepath.Join(got, filepath.FromSlash(rel))
		gi, err := os.Lstat(gp)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if wi.Mode().Type() != gi.Mode().Type() {
			t.Errorf("%s: type %v, want %v", rel, gi.Mode().Type(), wi.Mode().Type())
			return nil
		}
		if !gi.ModTime().Equal(wi.ModTime()) {
			t.Errorf("%s: mtime %v, want %v", rel, gi.ModTime(), wi.ModTime())
		}
		switch {
		case wi.Mode()&fs.ModeSymlink != 0:
			wt, _ := os.Readlink(p)
			gt, _ := os.Readlink(gp)
			if wt != gt {
				t.Errorf("%s: link target %q, want %q", rel, gt, wt)
			}
		case wi.IsDir():
			if wi.Mode().Perm() != gi.Mode().Perm() {
				t.Errorf("%s: mode %v, want %v", rel, gi.Mode().Perm(), wi.Mode().Perm())
			}
		default:
			if wi.Mode().Perm() != gi.Mode().Perm() {
				t.Errorf("%s: mode %v, want %v", rel, gi.Mode().Perm(), wi.Mode().Perm())
			}
			wd, _ := os.ReadFile(p)
			gd, err := os.ReadFile(gp)
			if err != nil || !bytes.Equal(wd, gd) {
				t.Errorf("%s: content differs (%d bytes, want %d; %v)", rel, len(gd), len(wd), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(got, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == got {
			return err
		}
		rel, _ := filepath.Rel(got, p)
		if rel == fsys.InternalDir {
			return filepath.SkipDir // lockstep's own (the join hint), not the folder's
		}
		if rel = filepath.ToSlash(rel); !seen[rel] {
			t.Errorf("unexpected %s in the restored tree", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// vec is a version vector of origins, each at counter 1 but the last at
// last.
func vec(last uint64, origins ...crypt.DeviceID) index.Vector {
	var v index.Vector
	for i, o := range origins {
		n := uint64(1)
		if i == len(origins)-1 {
			n = last
		}
		v = append(v, index.Counter{ID: o.Short(), Value: n})
	}
	return index.Canonical(v)
}

func TestRecoverTree(t *testing.T) {
	src := makeTree(t)
	s := newSealer(t)
	// Older history: origin A's first versions, one file deleted later.
	s.add(index.Record{Name: "hello.txt", Mode: 0o644, ModTime: 1, Size: 9, Blocks: s.content([]byte("old hello")), Version: vec(1, originA)}, originA, 1)
	s.add(index.Record{Name: "gone.txt", Mode: 0o644, ModTime: 1, Size: 3, Blocks: s.content([]byte("bye")), Version: vec(1, originA)}, originA, 2)
	s.add(index.Record{Name: "gone-dir", Type: index.Dir, Mode: 0o755, ModTime: 1, Version: vec(1, originA)}, originA, 3)
	// The current tree from B, dominating A's versions.
	next := s.addTreeVersion(src, originB, 1, vec(1, originA, originB))
	s.add(index.Record{Name: "gone.txt", Deleted: true, ModTime: 2, Version: vec(2, originA, originB)}, originB, next)
	s.add(index.Record{Name: "gone-dir", Type: index.Dir, Deleted: true, ModTime: 2, Version: vec(2, originA, originB)}, originB, next+1)
	// A concurrent, older edit from C loses to B's by modification time,
	// though it comes later in the log.
	s.add(index.Record{Name: "docs/readme.md", Mode: 0o600, ModTime: 5, Size: 4, Blocks: s.content([]byte("lost")), Version: vec(1, originC)}, originC, 1)
	if n := len(s.ids["big.bin"]); n < 3 {
		t.Fatalf("big.bin has %d chunks; the test wants a multi-chunk file", n)
	}

	tr := newTestReceiver(t, s)
	tr.start()
	opts := tr.options(t)
	var last Progress
	calls := 0
	opts.Progress = func(p Progress) { last = p; calls++ }
	res, err := Recover(recoverCtx(t), opts)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	compareTrees(t, src, opts.To)
	// The folder added on the recovered tree chunks as its devices did.
	h, ok, err := index.ReadJoinHint(opts.To)
	if err != nil || !ok || h.Folder != testFolder || h.Polynomial != uint64(s.keys.Polynomial()) {
		t.Errorf("join hint = %+v, %v, %v; want folder %s, polynomial %v", h, ok, err, testFolder, s.keys.Polynomial())
	}

	want := Result{Files: 7, Dirs: 5, Symlinks: 2}
	for _, name := range []string{"hello.txt", "empty", "big.bin", "bin/tool.sh", "café/naïve ☃.txt", "docs/readme.md", "ro/file"} {
		fi, err := os.Stat(filepath.Join(src, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		want.Bytes += fi.Size()
	}
	if res.Files != want.Files || res.Dirs != want.Dirs || res.Symlinks != want.Symlinks || res.Bytes != want.Bytes || len(res.Damaged) != 0 || res.DamagedRecords != 0 {
		t.Errorf("result %+v, want %+v", res, want)
	}
	if calls == 0 || last != (Progress{Files: 9, FilesTotal: 9, Bytes: want.Bytes, BytesTotal: want.Bytes}) {
		t.Errorf("last progress %+v after %d calls", last, calls)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.acked != int64(len(s.log)) {
		t.Errorf("acknowledged up to %d of %d", tr.acked, len(s.log))
	}
	if tr.maxUnacked < 1 || tr.maxUnacked > sendWindow {
		t.Errorf("at most %d messages unacknowledged", tr.maxUnacked)
	}
	// The recovering device said it holds nothing of the receiver's log.
	f := tr.peerCC.GetFolders()
	if len(f) != 1 || f[0].GetId() != testFolder || len(f[0].GetDevices()) != 2 {
		t.Fatalf("peer's cluster config %v", tr.peerCC)
	}
	for _, d := range f[0].GetDevices() {
		if d.GetMaxSequence() != 0 || d.GetIndexId() != 0 {
			t.Errorf("device entry %v claims data", d)
		}
		if recv := string(d.GetDeviceId()) == string(tr.id.ID[:]); d.GetEncrypted() != recv {
			t.Errorf("device entry %v: encrypted %v", d, d.GetEncrypted())
		}
	}
}
