package restore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident reports which of f's pages are in the page cache.
func resident(t *testing.T, f *os.File, size int64) []byte {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+pageSize-1)/pageSize)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Skip("mincore:", errno)
	}
	return vec
}

// A writeback drops from the page cache what lies dropBehind behind the
// part of the file written from its start, once written to disk, and
// keeps the rest: blocks are written out of order, and a page dropped
// before its neighbour block is in would have to be read back.
func TestWritebackDropsBehind(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type == unix.TMPFS_MAGIC {
		t.Skip("the page cache is the storage on tmpfs")
	}
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const block = 1 << 20
	const size = 4 * dropBehind
	data := bytes.Repeat([]byte{7}, block)
	wb := startWriteback(f)
	// Pairs of blocks swapped, and one block of the last quarter held back
	// to the end: the written part from the start stops there until then.
	hold := int64(3*dropBehind + 5*block)
	for off := int64(0); off < size; off += 2 * block {
		for _, o := range []int64{off + block, off} {
			if o == hold {
				continue
			}
			if _, err := f.WriteAt(data, o); err != nil {
				t.Fatal(err)
			}
			wb.add(o, block)
		}
	}
	if _, err := f.WriteAt(data, hold); err != nil {
		t.Fatal(err)
	}
	wb.stop()

	vec := resident(t, f, size)
	count := func(from, to int64) (n int) {
		for _, v := range vec[from/pageSize : to/pageSize] {
			n += int(v & 1)
		}
		return n
	}
	pages := int(dropBehind / pageSize)
	if n := count(0, dropBehind); n > pages/10 {
		t.Errorf("%d of the first %d pages still cached", n, pages)
	}
	// Written from the start up to the held block: dropped at most to
	// dropBehind before it.
	if n := count(hold-dropBehind, size); n < int((size-hold+dropBehind)/pageSize)*9/10 {
		t.Errorf("only %d of the pages from dropBehind before the gap on are cached", n)
	}
}
