package restore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// A writeback works on a descriptor of its own, which stop releases, and
// leaves the file as written; more ranges than its queue holds are dropped,
// never waited for.
func TestWritebackReleasesItsDescriptor(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := openFDs(t)
	wb := startWriteback(f)
	if wb == nil {
		t.Fatal("no writeback for an *os.File")
	}
	if got := openFDs(t); got != before+1 {
		t.Fatalf("%d descriptors open while writing back, want %d", got, before+1)
	}
	block := bytes.Repeat([]byte{7}, 64<<10)
	const blocks = 3 * writebackQueue
	for i := range blocks {
		off := int64(i * len(block))
		if _, err := f.WriteAt(block, off); err != nil {
			t.Fatal(err)
		}
		wb.add(off, len(block))
	}
	wb.stop()
	if got := openFDs(t); got != before {
		t.Fatalf("%d descriptors open after stop, want %d", got, before)
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() != blocks*int64(len(block)) {
		t.Fatalf("size %v, %v; want %d", fi.Size(), err, blocks*len(block))
	}
}

func TestWritebackWithoutDescriptor(t *testing.T) {
	wb := startWriteback(struct{}{})
	if wb != nil {
		t.Fatal("a writeback for something without a descriptor")
	}
	wb.add(0, 1)
	wb.stop()
}
