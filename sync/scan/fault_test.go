package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// growingFile appends to the file on disk on its first read, as a program
// still writing it would.
type growingFile struct {
	fsys.File
	path  string
	grown bool
}

func (g *growingFile) grow() error {
	if g.grown {
		return nil
	}
	g.grown = true
	f, err := os.OpenFile(g.path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("more")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (g *growingFile) Read(p []byte) (int, error) {
	if err := g.grow(); err != nil {
		return 0, err
	}
	return g.File.Read(p)
}

func (g *growingFile) ReadAt(p []byte, off int64) (int, error) {
	if err := g.grow(); err != nil {
		return 0, err
	}
	return g.File.ReadAt(p, off)
}

func TestScanChangingFile(t *testing.T) {
	for _, changes := range []int{1, 2} {
		t.Run(fmt.Sprint(changes, " changes"), func(t *testing.T) {
			tr, cfs, known := scanned(t)
			writeFile(t, tr.root, "a/small.txt", []byte("being written"), 0o640)
			cfs.wrap = func(name string, n int, f fsys.File) fsys.File {
				if name != "a/small.txt" || n >= changes {
					return f
				}
				return &growingFile{File: f, path: filepath.Join(tr.root, "a/small.txt")}
			}
			res := scanDir(t, cfs, known, nil, Options{})
			if cfs.opens["a/small.txt"] != 2 {
				t.Errorf("opened %d times, want 2", cfs.opens["a/small.txt"])
			}
			if changes == 1 {
				// The second read is consistent and is what is reported.
				data, _ := os.ReadFile(filepath.Join(tr.root, "a/small.txt"))
				r := res.recs["a/small.txt"]
				if len(res.recs) != 1 || len(res.skips) != 0 || r.Size != int64(len(data)) {
					t.Fatalf("records %v, skips %v", res.recs, res.skips)
				}
				checkBlocks(t, r.Name, data, r.Blocks)
				return
			}
			// Changing on both tries: skipped, and not deleted either.
			if len(res.recs) != 0 || len(res.skips) != 1 || !errors.Is(res.skips[0].err, ErrChanging) {
				t.Fatalf("records %v, skips %v", res.recs, res.skips)
			}
		})
	}
}

func TestScanVanished(t *testing.T) {
	tr, cfs, known := scanned(t)
	writeFile(t, tr.root, "a/small.txt", []byte("changed"), 0o640)
	writeFile(t, tr.root, "new.txt", []byte("new"), 0o640)
	cfs.beforeOpen = func(name string, _ int) {
		os.Remove(filepath.Join(tr.root, name))
	}
	res := scanDir(t, cfs, known, nil, Options{})
	if r := res.recs["a/small.txt"]; len(res.recs) != 1 || !r.Deleted || r.Type != index.File {
		t.Errorf("records %v", res.recs)
	}
	if len(res.skips) != 0 {
		t.Errorf("skips %v", res.skips)
	}
}

func TestScanFnError(t *testing.T) {
	_, cfs, _ := scanned(t)
	boom := errors.New("boom")
	for _, stopAfter := range []int{0, 1, 5} {
		calls := 0
		err := Scan(t.Context(), cfs, newKnown(), nil, Options{Polynomial: testPol, Workers: 2}, func(index.Record) error {
			calls++
			if calls > stopAfter {
				return boom
			}
			return nil
		})
		if err != boom || calls != stopAfter+1 {
			t.Errorf("stop after %d: err %v after %d calls", stopAfter, err, calls)
		}
	}
}

func TestScanCancel(t *testing.T) {
	_, cfs, _ := scanned(t)
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	err := Scan(ctx, cfs, newKnown(), nil, Options{Polynomial: testPol}, func(index.Record) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v after %d calls", err, calls)
	}
	// Already cancelled: nothing is reported.
	calls = 0
	err = Scan(ctx, cfs, newKnown(), nil, Options{Polynomial: testPol}, func(index.Record) error {
		calls++
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 0 {
		t.Errorf("cancelled scan: err %v, %d calls", err, calls)
	}
}

// disorderedKnown returns records out of order.
type disorderedKnown struct{ *memKnown }

func (k disorderedKnown) EachLocal(fn func(index.Record) error) error {
	for _, n := range []string{"b", "a"} {
		if err := fn(index.Record{Name: n, Type: index.File}); err != nil {
			return err
		}
	}
	return nil
}

type failingKnown struct{ *memKnown }

var errIndex = errors.New("index is broken")

func (failingKnown) EachLocal(func(index.Record) error) error { return errIndex }

func TestScanKnownErrors(t *testing.T) {
	_, cfs, known := scanned(t)
	if _, err := tryScan(cfs, disorderedKnown{known}, nil, Options{}); !errors.Is(err, ErrKnownOrder) {
		t.Errorf("disordered: %v", err)
	}
	if _, err := tryScan(cfs, failingKnown{known}, nil, Options{}); !errors.Is(err, errIndex) {
		t.Errorf("failing: %v", err)
	}
}

// TestScanKnownUnder: a subtree scan uses EachLocalUnder when there is
// one, and the whole-folder scan never does.
func TestScanKnownUnder(t *testing.T) {
	_, cfs, known := scanned(t)
	k := &underKnown{memKnown: known}
	scanDir(t, cfs, k, []string{"a", "big.bin", "日本"}, Options{})
	if k.under != 3 {
		t.Errorf("EachLocalUnder called %d times, want 3", k.under)
	}
	scanDir(t, cfs, k, nil, Options{})
	if k.under != 3 {
		t.Errorf("whole-folder scan used EachLocalUnder")
	}
}

// TestScanWorkers: the result does not depend on the number of workers.
func TestScanWorkers(t *testing.T) {
	root := t.TempDir()
	for i := range 200 {
		writeFile(t, root, fmt.Sprintf("d%d/f%03d", i%7, i), randBytes(uint64(i), i*97), 0o644)
	}
	writeFile(t, root, "big", randBytes(99, 3<<20), 0o644)
	folder := openRoot(t, root)
	var first map[string]index.Record
	for _, w := range []int{1, 2, 3, 16} {
		res := scanDir(t, folder, newKnown(), nil, Options{Workers: w})
		if len(res.recs) != 208 {
			t.Fatalf("workers=%d: %d records", w, len(res.recs))
		}
		if first == nil {
			first = res.recs
			continue
		}
		for n, r := range res.recs {
			f := first[n]
			if r.Size != f.Size || !slices.Equal(r.Blocks, f.Blocks) || r.Type != f.Type {
				t.Errorf("workers=%d: %s differs", w, n)
			}
		}
	}
}

func TestMinimalPaths(t *testing.T) {
	cases := []struct {
		in, want []string
	}{
		{nil, nil},
		{[]string{"a"}, []string{"a"}},
		{[]string{"a/b", "a", "a/c"}, []string{"a"}},
		{[]string{"a/x", "a-b", "a", "a.c/d"}, []string{"a-b", "a.c/d", "a"}},
		{[]string{"b", "a/", "./c", "b"}, []string{"a", "b", "c"}},
		{[]string{"x", "."}, []string{""}},
		{[]string{"x", ""}, []string{""}},
		{[]string{"ab", "a"}, []string{"a", "ab"}},
	}
	for _, c := range cases {
		if got := minimalPaths(c.in); !slices.Equal(got, c.want) {
			t.Errorf("minimalPaths(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestScanCancelAfterLastRecord: a cancel from the callback of the only
// record, when every producer has already finished, is still reported.
func TestScanCancelAfterLastRecord(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "only"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := openRoot(t, dir)
	for range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := Scan(ctx, fs, newKnown(), nil, Options{Polynomial: testPol}, func(index.Record) error {
			calls++
			time.Sleep(time.Millisecond) // let the producers finish first
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) || calls != 1 {
			t.Fatalf("err %v after %d calls", err, calls)
		}
	}
}

// understatedFile reports a size smaller than its content, as some FUSE
// and pseudo files do.
type understatedFile struct{ fsys.File }

func (u understatedFile) Stat() (fs.FileInfo, error) {
	fi, err := u.File.Stat()
	if err != nil {
		return nil, err
	}
	return understatedInfo{fi}, nil
}

type understatedInfo struct{ fs.FileInfo }

func (u understatedInfo) Size() int64 { return u.FileInfo.Size() - 3 }

// TestScanMoreThanItsSize: a file holding more than its stated size is
// not recorded as its first size bytes.
func TestScanMoreThanItsSize(t *testing.T) {
	tr, cfs, known := scanned(t)
	writeFile(t, tr.root, "a/small.txt", []byte("more than it says"), 0o640)
	cfs.wrap = func(name string, _ int, f fsys.File) fsys.File {
		if name != "a/small.txt" {
			return f
		}
		return understatedFile{f}
	}
	res := scanDir(t, cfs, known, nil, Options{})
	if len(res.recs) != 0 || len(res.skips) != 1 || !errors.Is(res.skips[0].err, ErrChanging) {
		t.Fatalf("records %v, skips %v", res.recs, res.skips)
	}
}
