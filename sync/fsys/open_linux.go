package fsys

import (
	"io/fs"
	"os"
	"path"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// haveOpenBeneath: openBeneath may work here (openat2 exists since Linux
// 5.6; where it does not, each call fails and the caller goes the long way).
const haveOpenBeneath = true

// noOpenat2 is set once openat2 turns out to be missing (before Linux 5.6,
// or filtered away), so that no open tries it again.
var noOpenat2 atomic.Bool

// openBeneath opens name read-only under dir with openat2, which refuses
// any symlink on the way (and so any way out of dir), or returns nil if it
// cannot. Only a regular file or a directory that want accepts is
// returned: the open does not block (a FIFO would wait for a writer) nor
// take a terminal, and anything else is closed unread. (The careful path
// never opens such a node at all; the folder's walk never asks for one,
// so only a name replaced between walk and read can get here.)
func openBeneath(dir *os.File, name string, want func(fs.FileMode) error) *os.File {
	if noOpenat2.Load() {
		return nil
	}
	rc, err := dir.SyscallConn()
	if err != nil {
		return nil
	}
	fd, oerr := -1, error(nil)
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if err := rc.Control(func(d uintptr) {
		for {
			fd, oerr = unix.Openat2(int(d), name, &how)
			if oerr != unix.EINTR {
				return
			}
		}
	}); err != nil || oerr != nil {
		if oerr == unix.ENOSYS {
			noOpenat2.Store(true)
		}
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || !acceptable(&st, want) || unix.SetNonblock(fd, false) != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), name))
}

// acceptable reports whether st is a regular file or a directory that want
// takes.
func acceptable(st *unix.Stat_t, want func(fs.FileMode) error) bool {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return want(0) == nil
	case unix.S_IFDIR:
		return want(fs.ModeDir) == nil
	}
	return false
}
