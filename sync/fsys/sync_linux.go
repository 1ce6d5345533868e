package fsys

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFilesystem flushes the whole filesystem holding d with syncfs(2).
func syncFilesystem(d *os.File) error {
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Syncfs(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "syncfs", Path: d.Name(), Err: serr}
	}
	return nil
}

// StartWriteback asks the kernel to begin writing n bytes of f at off to
// disk without waiting for them, so that a later barrier finds little left
// to flush. It is a hint: a file without a descriptor (a test's wrapper)
// and any error are ignored. It may wait while the disk's queue is full.
func StartWriteback(f File, off int64, n int) {
	if fd, ok := f.(interface{ Fd() uintptr }); ok {
		_ = unix.SyncFileRange(int(fd.Fd()), off, int64(n), unix.SYNC_FILE_RANGE_WRITE)
	}
}

// DropWritten waits until the kernel has written n bytes of f at off to
// disk and drops them from the page cache. It is for data written once
// and not read again soon, such as a recovery's: it then takes little of
// the page cache, and the pages it frees are the ones its next writes
// reuse. It makes nothing durable (a barrier still must), and is a hint
// like StartWriteback. Only whole pages written in full should be given:
// a page dropped while part of it is still to be written must be read back
// from disk first.
func DropWritten(f File, off, n int64) {
	if fd, ok := f.(interface{ Fd() uintptr }); ok {
		const wait = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		if unix.SyncFileRange(int(fd.Fd()), off, n, wait) == nil {
			_ = unix.Fadvise(int(fd.Fd()), off, n, unix.FADV_DONTNEED)
		}
	}
}
