package restore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"lockstep/sync/fsys"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// A writeback hands ranges over on the file it was given, with no
// descriptor of its own, and leaves the file as written; more ranges than
// its queue holds are dropped, never waited for.
func TestWritebackDropsWhatItCannotQueue(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := openFDs(t)
	wb := startWriteback(f)
	block := bytes.Repeat([]byte{7}, 64<<10)
	const blocks = 3 * writebackQueue
	for i := range blocks {
		off := int64(i * len(block))
		if _, err := f.WriteAt(block, off); err != nil {
			t.Fatal(err)
		}
		wb.add(off, len(block))
	}
	if got := openFDs(t); got != before {
		t.Fatalf("%d descriptors open while writing back, want %d", got, before)
	}
	wb.stop()
	fi, err := f.Stat()
	if err != nil || fi.Size() != blocks*int64(len(block)) {
		t.Fatalf("size %v, %v; want %d", fi.Size(), err, blocks*len(block))
	}
}

// A file without a descriptor (a test's wrapper) is written back not at
// all and without error, and a nil writeback does nothing.
func TestWritebackWithoutDescriptor(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wb := startWriteback(struct{ fsys.File }{f})
	wb.add(0, 1)
	wb.stop()
	var none *writeback
	none.add(0, 1)
	none.stop()
}

// contiguous follows the written part of a file from its start, whatever
// order the ranges come in.
func TestContiguous(t *testing.T) {
	var c contiguous
	steps := []struct{ off, n, want int64 }{
		{10, 5, 0},  // past a gap
		{0, 4, 4},   // still a gap at 4
		{20, 1, 4},  // another one further on
		{4, 6, 15},  // fills 4..10, joins 10..15
		{15, 5, 21}, // joins 20..21
		{21, 3, 24},
		{30, 2, 24},
	}
	for i, s := range steps {
		if got := c.add(s.off, s.n); got != s.want {
			t.Fatalf("step %d: add(%d, %d) = %d, want %d", i, s.off, s.n, got, s.want)
		}
	}
	if len(c.ahead) != 1 {
		t.Fatalf("%d ranges kept past the gap, want 1", len(c.ahead))
	}
}
