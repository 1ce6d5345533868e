package local

import (
	"os"
	"runtime"
	"syscall"
)

// maxKeptFiles bounds the blob files kept open for ranged reads.
const maxKeptFiles = 64

// keepOpen: on Windows an open file cannot be deleted or renamed over, so
// nothing is kept open there.
const keepOpen = runtime.GOOS != "windows"

// keptFile is a blob's file kept open for ranged reads, with its
// FileInfo, to tell whether the name still leads to it.
type keptFile struct {
	*os.File
	fi os.FileInfo
}

// rangeFile returns an open file of the blob at p for positioned reads, and
// the function to call when done with it. Files are kept open between
// calls: a recovery reads thousands of small chunks from a handful of
// packs, and opening the pack again for each was a fifth of the receiver's
// CPU. The name is looked up on every call (one Lstat in the cached
// directory), so a blob replaced or deleted since, by this process or
// another sharing the directory, is never read through an old file; one
// this store replaces or removes is let go at once (forget).
func (s *Store) rangeFile(p string) (*os.File, func(), error) {
	d, _, done, err := s.dir(dirOf(p), false)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	fi, err := regularIn(d, baseOf(p))
	if err != nil {
		s.kept.forget(p)
		return nil, nil, err
	}
	if k, kdone, ok := s.kept.get(p, func(k keptFile) bool { return os.SameFile(k.fi, fi) }); ok {
		return k.File, kdone, nil
	}
	f, err := d.Open(baseOf(p))
	if err != nil {
		return nil, nil, err
	}
	ofi, err := f.Stat()
	if err == nil && !ofi.Mode().IsRegular() {
		err = syscall.ELOOP
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, s.kept.add(p, keptFile{f, ofi}, keepOpen && os.SameFile(fi, ofi)), nil
}
