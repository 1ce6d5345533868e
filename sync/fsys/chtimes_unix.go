//go:build unix

package fsys

import (
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// chtimesNoFollow sets the access and modification times of name to mtime
// with utimensat(AT_SYMLINK_NOFOLLOW) relative to its parent directory, so
// a final symlink gets its own times and is never followed. The caller has
// checked that no parent is a symlink.
func chtimesNoFollow(root *os.Root, name string, mtime time.Time) error {
	ts, err := unix.TimeToTimespec(mtime)
	if err != nil {
		return &os.PathError{Op: "chtimes", Path: name, Err: err}
	}
	d, err := root.OpenFile(path.Dir(name), os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var uerr error
	err = rc.Control(func(fd uintptr) {
		uerr = unix.UtimesNanoAt(int(fd), path.Base(name), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		return err
	}
	if uerr != nil {
		return &os.PathError{Op: "chtimes", Path: name, Err: uerr}
	}
	return nil
}
