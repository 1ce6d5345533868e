package scan

import (
	"bytes"
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/restic/chunker"

	"lockstep/chunk"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/test/testutil"
)

// testPol is an irreducible polynomial of degree 53.
const testPol = chunker.Pol(0x3DA3358B4DC173)

func TestMain(m *testing.M) { testutil.Main(m) }

// memKnown is an index in memory: the records of the last scans.
type memKnown struct {
	recs map[string]index.Record
}

func newKnown() *memKnown { return &memKnown{recs: map[string]index.Record{}} }

func (k *memKnown) Local(name string) (index.Record, bool) {
	r, ok := k.recs[name]
	return r, ok && !r.Deleted
}

func (k *memKnown) EachLocal(fn func(index.Record) error) error {
	names := make([]string, 0, len(k.recs))
	for n := range k.recs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if r := k.recs[n]; !r.Deleted {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// apply stores scan results as the engine would.
func (k *memKnown) apply(recs map[string]index.Record) {
	for n, r := range recs {
		if r.Deleted {
			delete(k.recs, n)
		} else {
			k.recs[n] = r
		}
	}
}

func (k *memKnown) clone() *memKnown {
	c := newKnown()
	for n, r := range k.recs {
		c.recs[n] = r
	}
	return c
}

// underKnown adds the optional KnownUnder and counts its use.
type underKnown struct {
	*memKnown
	under int
}

func (k *underKnown) EachLocalUnder(dir string, fn func(index.Record) error) error {
	k.under++
	prefix := dir + "/"
	return k.EachLocal(func(r index.Record) error {
		if len(r.Name) > len(prefix) && r.Name[:len(prefix)] == prefix {
			return fn(r)
		}
		return nil
	})
}

// countingFS counts opens and listings per name and injects faults.
type countingFS struct {
	FS
	mu       sync.Mutex
	opens    map[string]int
	readDirs map[string]int
	// failDir makes ReadDir of that name fail.
	failDir map[string]error
	// beforeOpen runs before each Open with the number of earlier opens
	// of the same name.
	beforeOpen func(name string, n int)
	// wrap, if set, wraps each opened file.
	wrap func(name string, n int, f fsys.File) fsys.File
}

func newCounting(inner FS) *countingFS {
	return &countingFS{FS: inner, opens: map[string]int{}, readDirs: map[string]int{}, failDir: map[string]error{}}
}

func (c *countingFS) Open(name string) (fsys.File, error) {
	c.mu.Lock()
	n := c.opens[name]
	c.opens[name]++
	c.mu.Unlock()
	if c.beforeOpen != nil {
		c.beforeOpen(name, n)
	}
	f, err := c.FS.Open(name)
	if err == nil && c.wrap != nil {
		f = c.wrap(name, n, f)
	}
	return f, err
}

func (c *countingFS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.mu.Lock()
	c.readDirs[name]++
	err := c.failDir[name]
	c.mu.Unlock()
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	return c.FS.ReadDir(name)
}

func (c *countingFS) totalOpens() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.opens {
		n += v
	}
	return n
}

type skipped struct {
	name string
	err  error
}

// result is what one scan reported.
type result struct {
	recs  map[string]index.Record
	skips []skipped
}

func (r result) skipNames() []string {
	var out []string
	for _, s := range r.skips {
		out = append(out, s.name)
	}
	slices.Sort(out)
	return out
}

// scanDir runs Scan and collects its output, failing on an error or on a
// name reported twice.
func scanDir(t testing.TB, folder FS, known Known, paths []string, opts Options) result {
	t.Helper()
	res, err := tryScan(folder, known, paths, opts)
	if err != nil {
		t.Fatalf("Scan(%q): %v", paths, err)
	}
	for _, r := range res.recs {
		if r.Name == "" {
			t.Fatalf("record without a name: %+v", r)
		}
	}
	return res
}

func tryScan(folder FS, known Known, paths []string, opts Options) (result, error) {
	res := result{recs: map[string]index.Record{}}
	if opts.Polynomial == 0 {
		opts.Polynomial = testPol
	}
	opts.OnSkip = func(name string, err error) { res.skips = append(res.skips, skipped{name, err}) }
	var dup error
	err := Scan(context.Background(), folder, known, paths, opts, func(r index.Record) error {
		if _, ok := res.recs[r.Name]; ok && dup == nil {
			dup = &fs.PathError{Op: "reported twice", Path: r.Name, Err: fs.ErrExist}
		}
		res.recs[r.Name] = r
		return nil
	})
	if err == nil {
		err = dup
	}
	return res, err
}

// openRoot opens dir as the real FS.
func openRoot(t testing.TB, dir string) *fsys.Root {
	t.Helper()
	r, err := fsys.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// randBytes returns n reproducible pseudo-random bytes.
func randBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func writeFile(t testing.TB, root, name string, data []byte, perm fs.FileMode) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

func setMtime(t testing.TB, root, name string, mt time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(name)), mt, mt); err != nil {
		t.Fatal(err)
	}
}

// checkBlocks verifies that blocks are the chunks of data, as the chunk
// package cuts them, contiguous and summing to its length.
func checkBlocks(t testing.TB, name string, data []byte, blocks []index.Block) {
	t.Helper()
	sp, err := chunk.NewSplitter(testPol)
	if err != nil {
		t.Fatal(err)
	}
	want, err := sp.Chunks(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != len(want) {
		t.Fatalf("%s: %d blocks, want %d", name, len(blocks), len(want))
	}
	var off int64
	for i, b := range blocks {
		w := want[i]
		if b.Offset != off || b.Offset != w.Offset || b.Size != w.Size || b.Hash != w.Hash {
			t.Fatalf("%s: block %d = %+v, want %+v at offset %d", name, i, b, w, off)
		}
		if b.Hash != chunk.HashOf(data[off:off+int64(b.Size)]) {
			t.Fatalf("%s: block %d hash is not BLAKE3 of its bytes", name, i)
		}
		off += int64(b.Size)
	}
	if off != int64(len(data)) {
		t.Fatalf("%s: blocks cover %d bytes of %d", name, off, len(data))
	}
}
