package local

import (
	"errors"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// haveSyncfs says that syncfs(2) exists, so Sync needs no list of paths.
const haveSyncfs = true

// syncfs flushes the file system holding the store's directory.
func (s *Store) syncfs() error {
	d, err := s.root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return control(d, func(fd int) error { return unix.Syncfs(fd) })
}

// renameNoReplace renames tmp to final, both in directory d, failing with
// blob.ErrExist if final exists. It uses renameat2(RENAME_NOREPLACE) and
// falls back to a hard link on file systems without it.
func (s *Store) renameNoReplace(d *os.File, tmp, final string) error {
	err := control(d, func(fd int) error {
		return unix.Renameat2(fd, path.Base(tmp), fd, path.Base(final), unix.RENAME_NOREPLACE)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return s.existError(final)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.ENOTSUP):
		return s.linkNoReplace(tmp, final)
	}
	return err
}

// control runs fn with f's descriptor.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fnErr error
	if err := rc.Control(func(fd uintptr) { fnErr = fn(int(fd)) }); err != nil {
		return err
	}
	return fnErr
}

// startWriteback asks the kernel to begin writing f's pages now, without
// waiting: the batch's Sync then finds little left to flush instead of a
// whole batch's worth of data.
func startWriteback(f *os.File) {
	_ = control(f, func(fd int) error { return unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE) })
}
