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
