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
// cannot. Only a regular file or a directory is returned: the open does
// not block (a FIFO would wait for a writer), and anything else is closed
// unread.
func openBeneath(dir *os.File, name string) *os.File {
	rc, err := dir.SyscallConn()
	if err != nil {
		return nil
	}
	fd := -1
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
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
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || (st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFDIR) {
		unix.Close(fd)
		return nil
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), name))
}
