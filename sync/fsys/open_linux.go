package fsys

import (
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// haveOpenBeneath: openBeneath may work here (openat2 exists since Linux
// 5.6; where it does not, each call fails and the caller goes the long way).
const haveOpenBeneath = true

// openBeneath opens name read-only under dir with openat2, which refuses
// any symlink on the way (and so any way out of dir), or returns nil if it
// cannot.
func openBeneath(dir *os.File, name string) *os.File {
	rc, err := dir.SyscallConn()
	if err != nil {
		return nil
	}
	fd := -1
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if err := rc.Control(func(d uintptr) {
		for {
			fd, err = unix.Openat2(int(d), name, &how)
			if err != unix.EINTR {
				return
			}
		}
	}); err != nil || fd < 0 {
		return nil
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), name))
}
