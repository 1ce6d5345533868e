package local

import (
	"os"
	"syscall"
)

// maxCachedDirs bounds the directory handles a Store keeps open.
const maxCachedDirs = 1 << 12

// dir returns an os.Root of the store's directory dir (relative to the
// store), creating it and its parents when create is set, and the function
// to call when done with it; created lists the parents to fsync before a
// blob in dir is durable, as mkdirs does. Handles are cached: resolving a
// blob's path through the store's root walks every component with a
// syscall of its own, which made opening a sharded chunk cost more than
// reading it. Directories are never removed by the store, so a cached
// handle stays valid while it runs. Files opened through a handle stay
// usable after it is done.
func (s *Store) dir(dir string, create bool) (r *os.Root, created []string, done func(), err error) {
	if r, done, ok := s.dirs.get(dir, func(*os.Root) bool { return true }); ok {
		return r, nil, done, nil
	}
	r, err = s.root.OpenRoot(dir)
	if notExist(err) && create {
		if created, err = s.mkdirs(dir); err != nil {
			return nil, nil, nil, err
		}
		r, err = s.root.OpenRoot(dir)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return r, created, s.dirs.add(dir, r, true), nil
}

// openBlob opens the regular file at p (not a symlink or anything else:
// syscall.ELOOP), through the cached handle of its directory.
func (s *Store) openBlob(p string) (*os.File, error) {
	d, _, done, err := s.dir(dirOf(p), false)
	if err != nil {
		return nil, err
	}
	defer done()
	if _, err := regularIn(d, baseOf(p)); err != nil {
		return nil, err
	}
	return d.Open(baseOf(p))
}

// regularIn returns the FileInfo of the entry name in d, which must be a
// regular file (a symlink or anything else is syscall.ELOOP). os.Root
// follows a symlink within the root whatever the flags say, so an entry is
// checked before it is opened; the root still confines where it leads.
func regularIn(d *os.Root, name string) (os.FileInfo, error) {
	fi, err := d.Lstat(name)
	if err == nil && !fi.Mode().IsRegular() {
		err = syscall.ELOOP
	}
	return fi, err
}
