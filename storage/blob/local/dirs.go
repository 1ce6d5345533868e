package local

import (
	"os"
	"syscall"
)

// maxCachedDirs bounds the directory handles a Store keeps open.
const maxCachedDirs = 1 << 12

// dir returns an os.Root of the store's directory dir (relative to the
// store), creating it and its parents when create is set; created lists
// the parents to fsync before a blob in dir is durable, as mkdirs does.
// Handles are cached: resolving a blob's path through the store's root
// walks every component with a syscall of its own, which made opening a
// sharded chunk cost more than reading it. Directories are never removed
// by the store, so a cached handle stays valid while it runs.
func (s *Store) dir(dir string, create bool) (r *os.Root, created []string, err error) {
	s.mu.Lock()
	r = s.dirs[dir]
	s.mu.Unlock()
	if r != nil {
		return r, nil, nil
	}
	r, err = s.root.OpenRoot(dir)
	if notExist(err) && create {
		if created, err = s.mkdirs(dir); err != nil {
			return nil, nil, err
		}
		r, err = s.root.OpenRoot(dir)
	}
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.dirs[dir]; old != nil {
		r.Close()
		return old, created, nil
	}
	if len(s.dirs) >= maxCachedDirs {
		for k, d := range s.dirs {
			d.Close()
			delete(s.dirs, k)
		}
	}
	s.dirs[dir] = r
	return r, created, nil
}

// openBlob opens the regular file at p (not a symlink or anything else:
// syscall.ELOOP), through the cached handle of its directory.
func (s *Store) openBlob(p string) (*os.File, error) {
	d, _, err := s.dir(dirOf(p), false)
	if err != nil {
		return nil, err
	}
	// os.Root follows a symlink within the root whatever the flags say, so
	// the entry is checked first; the root still confines where it leads.
	fi, err := d.Lstat(baseOf(p))
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, syscall.ELOOP
	}
	return d.Open(baseOf(p))
}

// closeDirs releases the cached directory handles.
func (s *Store) closeDirs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, d := range s.dirs {
		d.Close()
		delete(s.dirs, k)
	}
}
