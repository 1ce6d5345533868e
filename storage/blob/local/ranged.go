package local

import (
	"os"
	"runtime"
	"syscall"
)

// maxHeldFiles bounds the blob files kept open for ranged reads.
const maxHeldFiles = 64

// keepOpen: on Windows an open file cannot be deleted or renamed over, so
// nothing is kept open there.
const keepOpen = runtime.GOOS != "windows"

// heldFile is a blob's file kept open for ranged reads; it leaves the
// cache when the blob is replaced, gone or evicted.
type heldFile struct {
	handle[*os.File]
	fi os.FileInfo // the file's, to tell whether the name still leads to it
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
	// os.Root follows a symlink within the root whatever the flags say, so
	// the entry is checked first; the root still confines where it leads.
	fi, err := d.Lstat(baseOf(p))
	if err == nil && !fi.Mode().IsRegular() {
		err = syscall.ELOOP
	}
	s.heldMu.Lock()
	h := s.held[p]
	if h != nil && err == nil && os.SameFile(h.fi, fi) {
		h.users++
		s.heldMu.Unlock()
		return h.v, func() { s.release(h) }, nil
	}
	if h != nil {
		s.drop(p, h)
	}
	s.heldMu.Unlock()
	if err != nil {
		return nil, nil, err
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
	h = &heldFile{handle: handle[*os.File]{v: f, users: 1, closing: true}, fi: ofi}
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if old := s.held[p]; old != nil {
		s.drop(p, old)
	}
	if len(s.held) >= maxHeldFiles {
		for k, o := range s.held {
			if o.users == 0 {
				s.drop(k, o)
			}
		}
	}
	if keepOpen && !s.closed && len(s.held) < maxHeldFiles && os.SameFile(fi, ofi) {
		h.closing = false
		s.held[p] = h
	}
	return f, func() { s.release(h) }, nil
}

// release ends one use of h. Called without heldMu.
func (s *Store) release(h *heldFile) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	h.done()
}

// drop takes h, cached as p, out of the cache. Called with heldMu.
func (s *Store) drop(p string, h *heldFile) {
	delete(s.held, p)
	h.retire()
}

// forget lets go of the file kept for the blob at p, which this store
// just replaced or removed: a file kept open would hold on to the old
// version's disk space.
func (s *Store) forget(p string) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if h := s.held[p]; h != nil {
		s.drop(p, h)
	}
}

// closeHeld closes every file kept for ranged reads, and keeps no more;
// those in use close when their reads end.
func (s *Store) closeHeld() {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	s.closed = true
	for p, h := range s.held {
		s.drop(p, h)
	}
}
