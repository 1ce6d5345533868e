package scan

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/restic/chunker"

	"lockstep/chunk"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

var baseTime = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)

// tree is the test folder's content: file name -> data.
type tree struct {
	root  string
	files map[string][]byte
}

// newTree builds a folder with nested directories, an empty file, a small
// file, a multi-chunk file, symlinks to a file and to a directory, unicode
// and space names, the ignore file, and the engine's own internal directory
// and a temp file (never reported).
func newTree(t *testing.T) *tree {
	root := t.TempDir()
	tr := &tree{root: root, files: map[string][]byte{
		"a/b/empty":            {},
		"a/small.txt":          []byte("hello, world\n"),
		"big.bin":              randBytes(1, 1<<20),
		"é dir/with space.txt": []byte("unicode"),
		"日本/ファイル":              []byte("nihongo"),
		IgnoreFile:             []byte("# nothing ignored yet\n"),
	}}
	for name, data := range tr.files {
		writeFile(t, root, name, data, 0o640)
		setMtime(t, root, name, baseTime)
	}
	writeFile(t, root, ".lockstep/versions/old~1", []byte("x"), 0o644)
	writeFile(t, root, "a/.lockstep-tmp-123", []byte("partial"), 0o600)
	for _, l := range [][2]string{{"a/small.txt", "link"}, {"a", "linkdir"}} {
		if err := os.Symlink(l[0], filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func TestScanNewTree(t *testing.T) {
	tr := newTree(t)
	cfs := newCounting(openRoot(t, tr.root))
	res := scanDir(t, cfs, newKnown(), nil, Options{})
	if len(res.skips) != 0 {
		t.Errorf("skips: %v", res.skips)
	}
	wantNames := []string{IgnoreFile, "a", "a/b", "a/b/empty", "a/small.txt", "big.bin", "link", "linkdir", "é dir", "é dir/with space.txt", "日本", "日本/ファイル"}
	var got []string
	for n := range res.recs {
		got = append(got, n)
	}
	slices.Sort(got)
	slices.Sort(wantNames)
	if !slices.Equal(got, wantNames) {
		t.Fatalf("records %q\nwant      %q", got, wantNames)
	}
	for name, data := range tr.files {
		r := res.recs[name]
		if r.Type != index.File || r.Size != int64(len(data)) || r.Mode != 0o640 || r.ModTime != baseTime.UnixNano() || r.Inode == 0 || r.Deleted {
			t.Errorf("%s: %+v", name, r)
		}
		checkBlocks(t, name, data, r.Blocks)
	}
	if n := len(res.recs["big.bin"].Blocks); n < 2 {
		t.Errorf("big.bin: %d blocks, want several", n)
	}
	if res.recs["a/b/empty"].Blocks != nil {
		t.Errorf("empty file has blocks")
	}
	for _, d := range []string{"a", "a/b", "é dir"} {
		if r := res.recs[d]; r.Type != index.Dir || r.Mode != 0o755 || r.Blocks != nil {
			t.Errorf("%s: %+v", d, r)
		}
	}
	if r := res.recs["link"]; r.Type != index.Symlink || r.Target != "a/small.txt" || r.Blocks != nil {
		t.Errorf("link: %+v", r)
	}
	if r := res.recs["linkdir"]; r.Type != index.Symlink || r.Target != "a" {
		t.Errorf("linkdir: %+v", r)
	}
	if cfs.readDirs["linkdir"] != 0 {
		t.Error("symlink to a directory was listed")
	}
	if cfs.readDirs[".lockstep"] != 0 {
		t.Error("internal directory was listed")
	}
	// Every file read once, nothing else.
	for name, n := range cfs.opens {
		if _, ok := tr.files[name]; !ok || n != 1 {
			t.Errorf("opened %s %d times", name, n)
		}
	}
}

// scanned returns the tree scanned once, and the index holding the result.
func scanned(t *testing.T) (*tree, *countingFS, *memKnown) {
	tr := newTree(t)
	cfs := newCounting(openRoot(t, tr.root))
	known := newKnown()
	known.apply(scanDir(t, cfs, known, nil, Options{}).recs)
	cfs.opens = map[string]int{}
	return tr, cfs, known
}

func TestScanUnchanged(t *testing.T) {
	_, cfs, known := scanned(t)
	for _, workers := range []int{1, 2, 3} {
		res := scanDir(t, cfs, known, nil, Options{Workers: workers})
		if len(res.recs) != 0 || len(res.skips) != 0 {
			t.Errorf("workers=%d: second scan reported %v %v", workers, res.recs, res.skips)
		}
	}
	if n := cfs.totalOpens(); n != 0 {
		t.Errorf("second scans opened %d files", n)
	}
}

func TestScanModeOnlyNotReread(t *testing.T) {
	tr, cfs, known := scanned(t)
	if err := os.Chmod(filepath.Join(tr.root, "big.bin"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := scanDir(t, cfs, known, nil, Options{})
	r, ok := res.recs["big.bin"]
	if len(res.recs) != 1 || !ok {
		t.Fatalf("records: %v", res.recs)
	}
	old := known.recs["big.bin"]
	if r.Mode != 0o600 || r.Size != old.Size || r.ModTime != old.ModTime || !slices.Equal(r.Blocks, old.Blocks) {
		t.Errorf("big.bin: %+v, was %+v", r, old)
	}
	if n := cfs.totalOpens(); n != 0 {
		t.Errorf("mode change re-read %d files", n)
	}
}

// TestScanTouch: a new mtime with the same size is re-read, because
// content can change without changing size; unchanged content keeps its
// blocks.
func TestScanTouch(t *testing.T) {
	tr, cfs, known := scanned(t)
	later := baseTime.Add(time.Hour)
	setMtime(t, tr.root, "big.bin", later)
	res := scanDir(t, cfs, known, nil, Options{})
	r := res.recs["big.bin"]
	if len(res.recs) != 1 || r.ModTime != later.UnixNano() || !slices.Equal(r.Blocks, known.recs["big.bin"].Blocks) {
		t.Fatalf("records: %v", res.recs)
	}
	if cfs.opens["big.bin"] != 1 || cfs.totalOpens() != 1 {
		t.Errorf("opens: %v", cfs.opens)
	}
}

func TestScanEdit(t *testing.T) {
	tr, cfs, known := scanned(t)
	big := slices.Clone(tr.files["big.bin"])
	copy(big[700<<10:], "an edit near the end")
	writeFile(t, tr.root, "big.bin", big, 0o640) // same inode and size
	setMtime(t, tr.root, "big.bin", baseTime)    // and the old mtime
	small := []byte("hello, world, longer now\n")
	writeFile(t, tr.root, "a/small.txt", small, 0o640)
	res := scanDir(t, cfs, known, nil, Options{})
	if len(res.recs) != 1 {
		// big.bin kept its inode, size and mtime: by design it is not
		// re-read (as with rsync and Syncthing); only small.txt changed.
		t.Fatalf("records: %v", res.recs)
	}
	r := res.recs["a/small.txt"]
	checkBlocks(t, "a/small.txt", small, r.Blocks)
	if r.Blocks[0].Hash == known.recs["a/small.txt"].Blocks[0].Hash {
		t.Error("edited file kept its old hash")
	}
	// A new mtime reveals the edit of big.bin: only the edited chunk differs.
	setMtime(t, tr.root, "big.bin", baseTime.Add(time.Second))
	res = scanDir(t, cfs, known, nil, Options{})
	r = res.recs["big.bin"]
	checkBlocks(t, "big.bin", big, r.Blocks)
	old := known.recs["big.bin"].Blocks
	changed := 0
	for i := range r.Blocks {
		if i >= len(old) || r.Blocks[i] != old[i] {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("%d blocks changed, want 1", changed)
	}
}

func TestScanDelete(t *testing.T) {
	tr, cfs, known := scanned(t)
	for _, p := range []string{"a/b/empty", "é dir", "link"} {
		if err := os.RemoveAll(filepath.Join(tr.root, p)); err != nil {
			t.Fatal(err)
		}
	}
	res := scanDir(t, cfs, known, nil, Options{})
	want := map[string]index.Type{"a/b/empty": index.File, "é dir": index.Dir, "é dir/with space.txt": index.File, "link": index.Symlink}
	if len(res.recs) != len(want) {
		t.Fatalf("records: %v", res.recs)
	}
	for name, typ := range want {
		r := res.recs[name]
		old := known.recs[name]
		if !r.Deleted || r.Type != typ || r.Blocks != nil || r.Size != 0 || r.Target != "" || r.ModTime != old.ModTime || r.Mode != old.Mode {
			t.Errorf("%s: %+v", name, r)
		}
	}
	// Applying the deletions leaves nothing to report.
	known.apply(res.recs)
	if res := scanDir(t, cfs, known, nil, Options{}); len(res.recs) != 0 {
		t.Errorf("after deletions: %v", res.recs)
	}
}

func TestScanTypeChange(t *testing.T) {
	tr, cfs, known := scanned(t)
	// A file becomes a directory, a directory with contents a file, a
	// symlink a file.
	os.Remove(filepath.Join(tr.root, "a/small.txt"))
	writeFile(t, tr.root, "a/small.txt/inner", []byte("in"), 0o644)
	os.RemoveAll(filepath.Join(tr.root, "é dir"))
	writeFile(t, tr.root, "é dir", []byte("now a file"), 0o644)
	os.Remove(filepath.Join(tr.root, "link"))
	writeFile(t, tr.root, "link", []byte("was a link"), 0o644)
	res := scanDir(t, cfs, known, nil, Options{})
	want := map[string]string{
		"a/small.txt":          "dir",
		"a/small.txt/inner":    "file",
		"é dir":                "file",
		"é dir/with space.txt": "deleted",
		"link":                 "file",
	}
	if len(res.recs) != len(want) {
		t.Fatalf("records: %v", res.recs)
	}
	for name, w := range want {
		r := res.recs[name]
		got := r.Type.String()
		if r.Deleted {
			got = "deleted"
		}
		if got != w {
			t.Errorf("%s: %s, want %s", name, got, w)
		}
	}
}

func TestScanSubtree(t *testing.T) {
	tr, cfs, known := scanned(t)
	writeFile(t, tr.root, "a/small.txt", []byte("changed"), 0o640)
	writeFile(t, tr.root, "big.bin", []byte("changed too"), 0o640)
	writeFile(t, tr.root, "a/b/new", []byte("new"), 0o640)
	os.Remove(filepath.Join(tr.root, "a/b/empty"))
	os.RemoveAll(filepath.Join(tr.root, "日本"))

	for _, k := range []Known{known, &underKnown{memKnown: known}} {
		cases := []struct {
			paths []string
			want  []string
		}{
			{[]string{"a/b"}, []string{"a/b/empty", "a/b/new"}},
			{[]string{"a/small.txt", "a/b/new"}, []string{"a/b/new", "a/small.txt"}},
			{[]string{"a", "a/b"}, []string{"a/b/empty", "a/b/new", "a/small.txt"}},
			{[]string{"日本/ファイル"}, []string{"日本/ファイル"}},
			{[]string{"日本"}, []string{"日本", "日本/ファイル"}},
			{[]string{"big.bin", "a/b/empty"}, []string{"a/b/empty", "big.bin"}},
			{[]string{"nothing/here", "linkdir/small.txt"}, nil},
			{[]string{"é dir"}, nil},
			{[]string{""}, []string{"a/b/empty", "a/b/new", "a/small.txt", "big.bin", "日本", "日本/ファイル"}},
		}
		for _, c := range cases {
			cfs.opens = map[string]int{}
			res := scanDir(t, cfs, k, c.paths, Options{})
			var got []string
			for n := range res.recs {
				got = append(got, n)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("%T paths %q: reported %q, want %q", k, c.paths, got, c.want)
			}
			for n := range cfs.opens {
				if !slices.Contains(c.want, n) {
					t.Errorf("paths %q: opened %s", c.paths, n)
				}
			}
		}
	}
}

// TestScanSubtreeSymlinkParent: a path whose parent is a symlink is not
// part of the folder, even if the symlink points inside it.
func TestScanSubtreeSymlinkParent(t *testing.T) {
	_, cfs, known := scanned(t)
	// linkdir -> a; a known record under a real directory that became a
	// symlink is gone.
	r := known.recs["a/small.txt"]
	r.Name = "linkdir/small.txt"
	known.recs[r.Name] = r
	res := scanDir(t, cfs, known, []string{"linkdir/small.txt"}, Options{})
	if r := res.recs["linkdir/small.txt"]; len(res.recs) != 1 || !r.Deleted {
		t.Errorf("records: %v", res.recs)
	}
	if cfs.totalOpens() != 0 || cfs.readDirs["linkdir"] != 0 {
		t.Error("followed the symlink")
	}
}

func TestScanIgnored(t *testing.T) {
	tr, cfs, known := scanned(t)
	ign := "*.log\nbuild/\n!keep.log\n"
	writeFile(t, tr.root, IgnoreFile, []byte(ign), 0o640)
	writeFile(t, tr.root, "x.log", []byte("log"), 0o640)
	writeFile(t, tr.root, "keep.log", []byte("kept"), 0o640)
	writeFile(t, tr.root, "a/build/out.o", []byte("obj"), 0o640)
	writeFile(t, tr.root, "build", nil, 0o640) // a file: "build/" is for directories
	// Known records that are now ignored are left alone, present or not.
	known.recs["old.log"] = index.Record{Name: "old.log", Type: index.File}
	known.recs["a/build"] = index.Record{Name: "a/build", Type: index.Dir}
	known.recs["a/build/gone.o"] = index.Record{Name: "a/build/gone.o", Type: index.File}
	m, err := ParseIgnore(strings.NewReader(ign))
	if err != nil {
		t.Fatal(err)
	}
	for _, paths := range [][]string{nil, {"a/build/out.o", "old.log", "a/build/gone.o", "x.log"}} {
		res := scanDir(t, cfs, known, paths, Options{Ignore: m})
		var got []string
		for n := range res.recs {
			got = append(got, n)
		}
		slices.Sort(got)
		want := []string{IgnoreFile, "build", "keep.log"}
		if paths != nil {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("paths %q: reported %q, want %q", paths, got, want)
		}
		if cfs.readDirs["a/build"] != 0 || cfs.opens["x.log"] != 0 {
			t.Errorf("paths %q: read an ignored name", paths)
		}
	}
}

func TestScanSkips(t *testing.T) {
	tr, cfs, known := scanned(t)
	writeFile(t, tr.root, "cafe\u0301.txt", []byte("nfd"), 0o644)
	writeFile(t, tr.root, "nfd-e\u0301/inner", []byte("x"), 0o644)
	if err := mkfifo(filepath.Join(tr.root, "a/fifo")); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	// The index had a directory where the FIFO is now: a name that is
	// skipped is not deleted, nor is anything under it.
	known.recs["a/fifo"] = index.Record{Name: "a/fifo", Type: index.Dir, Mode: 0o755}
	known.recs["a/fifo/child"] = index.Record{Name: "a/fifo/child", Type: index.File}
	res := scanDir(t, cfs, known, nil, Options{})
	if len(res.recs) != 0 {
		t.Errorf("records: %v", res.recs)
	}
	want := []string{"a/fifo", "cafe\u0301.txt", "nfd-e\u0301"}
	if got := res.skipNames(); !slices.Equal(got, want) {
		t.Fatalf("skipped %q, want %q", got, want)
	}
	for _, s := range res.skips {
		wantErr := fsys.ErrInvalidName
		if s.name == "a/fifo" {
			wantErr = ErrSpecial
		}
		if !errors.Is(s.err, wantErr) {
			t.Errorf("%s: %v, want %v", s.name, s.err, wantErr)
		}
	}
	if cfs.readDirs["nfd-e\u0301"] != 0 {
		t.Error("descended into a directory with an invalid name")
	}
}

// TestScanUnlistable: a directory that cannot be listed is reported, and
// what the index holds under it is not deleted; the folder root that
// cannot be listed fails the scan.
func TestScanUnlistable(t *testing.T) {
	_, cfs, known := scanned(t)
	cfs.failDir["a"] = fs.ErrPermission
	for _, paths := range [][]string{nil, {"a"}, {"a/b"}} {
		res := scanDir(t, cfs, known, paths, Options{})
		if len(res.recs) != 0 {
			t.Errorf("paths %q: records %v", paths, res.recs)
		}
		if paths == nil || paths[0] == "a" {
			if len(res.skips) != 1 || res.skips[0].name != "a" || !errors.Is(res.skips[0].err, fs.ErrPermission) {
				t.Errorf("paths %q: skips %v", paths, res.skips)
			}
		}
	}
	cfs.failDir["."] = fs.ErrPermission
	if _, err := tryScan(cfs, known, nil, Options{}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("unlistable root: %v", err)
	}
}

func TestScanOptionsErrors(t *testing.T) {
	_, cfs, known := scanned(t)
	for _, pol := range []uint64{uint64(testPol) &^ 1, uint64(testPol) | 1<<54, 1} {
		err := Scan(t.Context(), cfs, known, nil, Options{Polynomial: chunker.Pol(pol)}, func(index.Record) error { return nil })
		if !errors.Is(err, chunk.ErrPolynomial) {
			t.Errorf("polynomial %#x: %v", pol, err)
		}
	}
}

// TestScanReplacedSameSizeAndMtime: a file replaced by rename (a new
// inode) with the same size and mtime is re-read.
func TestScanReplacedSameSizeAndMtime(t *testing.T) {
	tr, cfs, known := scanned(t)
	data := []byte("HELLO, WORLD\n") // same length as before
	writeFile(t, tr.root, "a/new", data, 0o640)
	setMtime(t, tr.root, "a/new", baseTime)
	if err := os.Rename(filepath.Join(tr.root, "a/new"), filepath.Join(tr.root, "a/small.txt")); err != nil {
		t.Fatal(err)
	}
	res := scanDir(t, cfs, known, nil, Options{})
	r := res.recs["a/small.txt"]
	if len(res.recs) != 1 || r.Inode == known.recs["a/small.txt"].Inode {
		t.Fatalf("records %v", res.recs)
	}
	checkBlocks(t, r.Name, data, r.Blocks)
	// An unknown inode (0) on the index side is not compared.
	k := known.clone()
	old := k.recs["a/small.txt"]
	old.Inode, old.Blocks = 0, r.Blocks
	k.recs["a/small.txt"] = old
	if res := scanDir(t, cfs, k, nil, Options{}); len(res.recs) != 0 {
		t.Errorf("inode 0: records %v", res.recs)
	}
}

// TestScanLargeFiles scans files large enough to be cut by several
// goroutines, while small ones compete for the same Splitters: the blocks
// are the ones a single Splitter cuts.
func TestScanLargeFiles(t *testing.T) {
	root := t.TempDir()
	big := randBytes(7, 2*chunk.MinSegment+12345)
	mixed := slices.Clone(big)
	copy(mixed[chunk.MinSegment-3<<20:], bytes.Repeat([]byte{0x55}, 9<<20)) // cuts only at MaxSize
	files := map[string][]byte{"big.bin": big, "mixed.bin": mixed}
	for i := range 20 {
		files[fmt.Sprintf("small/%d", i)] = randBytes(uint64(i), 1000+i)
	}
	for name, data := range files {
		writeFile(t, root, name, data, 0o644)
	}
	for _, workers := range []int{1, 3} {
		res := scanDir(t, openRoot(t, root), newKnown(), nil, Options{Workers: workers})
		for name, data := range files {
			checkBlocks(t, name, data, res.recs[name].Blocks)
		}
	}
}

// TestBeforeHashing: the hook runs once, before any file is opened to be
// chunked, and only when one is; its error ends the scan before any file is
// read. Hashed adds up to the bytes chunked.
func TestBeforeHashing(t *testing.T) {
	tr := newTree(t)
	cfs := newCounting(openRoot(t, tr.root))
	calls := 0
	var hashed atomic.Int64
	opts := Options{
		BeforeHashing: func() error {
			calls++
			if n := cfs.totalOpens(); n != 0 {
				t.Errorf("%d files opened before the hook", n)
			}
			return nil
		},
		Hashed: func(n int64) { hashed.Add(n) },
	}
	known := newKnown()
	res := scanDir(t, cfs, known, nil, opts)
	var want int64
	for _, data := range tr.files {
		want += int64(len(data))
	}
	if calls != 1 || hashed.Load() != want {
		t.Errorf("hook called %d times, %d bytes hashed; want once and %d", calls, hashed.Load(), want)
	}

	// Nothing to chunk: an unchanged tree, then one where only a directory
	// and a symlink are new.
	known.apply(res.recs)
	calls = 0
	scanDir(t, cfs, known, nil, opts)
	if err := os.Mkdir(filepath.Join(tr.root, "new dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(tr.root, "new link")); err != nil {
		t.Fatal(err)
	}
	if res := scanDir(t, cfs, known, nil, opts); len(res.recs) != 2 {
		t.Errorf("records %v, want the new directory and symlink", res.recs)
	}
	if calls != 0 {
		t.Errorf("hook called %d times with nothing to chunk", calls)
	}

	// A refusal ends the scan before any file is read.
	stop := errors.New("stop")
	cfs.opens = map[string]int{}
	_, err := tryScan(cfs, newKnown(), nil, Options{BeforeHashing: func() error { return stop }})
	if !errors.Is(err, stop) {
		t.Errorf("scan ended with %v, want the hook's error", err)
	}
	if n := cfs.totalOpens(); n != 0 {
		t.Errorf("%d files opened after the hook refused", n)
	}
}
