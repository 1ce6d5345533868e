package fsys

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"sync/atomic"
	"time"
	"unsafe"

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
		Resolve: resolveBeneath,
	}
	if err := rc.Control(func(d uintptr) {
		for {
			fd, oerr = openat2(int(d), name, &how)
			if oerr != unix.EINTR {
				return
			}
		}
	}); err != nil || oerr != nil {
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

// resolveBeneath is how every one-call path resolution here resolves: never
// through a symlink, never out of the folder.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// createBeneath creates name exclusively under dir (mode 0o600, read and
// write) with one openat2 that refuses every symlink on the way. It
// reports false if it could not, for whatever reason (a name taken too):
// the caller then goes the careful way, which also words the error.
func createBeneath(dir *os.File, name string) (*os.File, bool) {
	if noOpenat2.Load() {
		return nil, false
	}
	how := unix.OpenHow{
		Flags:   unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Mode:    0o600,
		Resolve: resolveBeneath,
	}
	fd := -1
	err := inDir(dir, func(d int) (err error) {
		fd, err = openat2(d, name, &how)
		return err
	})
	if err != nil {
		return nil, false
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), name)), true
}

// atParent runs fn with a descriptor of the directory holding name, opened
// under dir with one openat2 that refuses every symlink on the way, and
// name's last component. It reports whether fn ran and succeeded; on false
// the caller goes the careful way, which repeats the operation and words
// its error. So fn must be safe to repeat after a failure.
func atParent(dir *os.File, name string, fn func(parent int, base string) error) bool {
	if noOpenat2.Load() {
		return false
	}
	parent, base := path.Split(name)
	return inDir(dir, func(d int) error {
		if parent == "" {
			return fn(d, base)
		}
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveBeneath}
		p, err := openat2(d, parent[:len(parent)-1], &how)
		if err != nil {
			return err
		}
		defer unix.Close(p)
		return fn(p, base)
	}) == nil
}

// openat2 is unix.Openat2 that notes a kernel without it, for good. (Only
// its own ENOSYS counts: one from the work done with what it opened, a
// filtered call, says nothing about openat2.)
func openat2(dirfd int, name string, how *unix.OpenHow) (int, error) {
	fd, err := unix.Openat2(dirfd, name, how)
	if err == unix.ENOSYS {
		noOpenat2.Store(true)
	}
	return fd, err
}

// inDir runs fn with dir's descriptor, retrying on EINTR.
func inDir(dir *os.File, fn func(fd int) error) error {
	rc, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(d uintptr) {
		for {
			if ferr = fn(int(d)); ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// chmodAt sets the permission bits of base in parent without following
// a symlink, atomically (fchmodat2, Linux 6.6). A symlink, or an older
// kernel, fails it with EOPNOTSUPP, and the careful path takes over: a
// check and then a chmod would leave a moment to swap in a symlink to
// anywhere.
func chmodAt(parent int, base string, mode fs.FileMode) error {
	return unix.Fchmodat(parent, base, uint32(mode&fs.ModePerm), unix.AT_SYMLINK_NOFOLLOW)
}

// chtimesAt sets base's times in parent without following a symlink.
func chtimesAt(parent int, base string, ts unix.Timespec) error {
	return unix.UtimesNanoAt(parent, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

// removeAt removes the file, symlink or empty directory base in parent.
func removeAt(parent int, base string) error {
	err := unix.Unlinkat(parent, base, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(parent, base, unix.AT_REMOVEDIR)
	}
	return err
}

// The one-call forms of Root's writes. Each reports whether it did the
// work; on false the caller goes the careful way.

func chmodBeneath(dir *os.File, name string, mode fs.FileMode) bool {
	return atParent(dir, name, func(p int, base string) error { return chmodAt(p, base, mode) })
}

func chtimesBeneath(dir *os.File, name string, mtime time.Time) bool {
	ts, err := unix.TimeToTimespec(mtime)
	return err == nil && atParent(dir, name, func(p int, base string) error { return chtimesAt(p, base, ts) })
}

func removeBeneath(dir *os.File, name string) bool {
	return atParent(dir, name, removeAt)
}

// errNotDone marks a one-call form that did not get as far as its work.
var errNotDone = errors.New("not done")

// renameBeneath renames with both parents resolved in one call each.
func renameBeneath(dir *os.File, from, to string) bool {
	return atParent(dir, from, func(pf int, fb string) error {
		var rerr error = errNotDone
		atParent(dir, to, func(pt int, tb string) error {
			// Onto a directory the careful path refuses (EEXIST, as
			// os.Rename does), where renameat would replace an empty one.
			var st unix.Stat_t
			if unix.Fstatat(pt, tb, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return rerr
			}
			rerr = unix.Renameat(pf, fb, pt, tb)
			return rerr
		})
		return rerr
	})
}

// renameBeneathFlags is renameBeneath for renameat2's flags
// (RENAME_NOREPLACE, RENAME_EXCHANGE). It reports whether the call was
// made, and its error.
func renameBeneathFlags(dir *os.File, from, to string, flags uint) (bool, error) {
	var rerr error = errNotDone
	atParent(dir, from, func(pf int, fb string) error {
		atParent(dir, to, func(pt int, tb string) error {
			rerr = unix.Renameat2(pf, fb, pt, tb, flags)
			return rerr
		})
		return rerr
	})
	if errors.Is(rerr, errNotDone) {
		return false, nil
	}
	return true, rerr
}

const (
	renameNoReplace = unix.RENAME_NOREPLACE
	renameExchange  = unix.RENAME_EXCHANGE
)

// openRWBeneath opens name under dir for reading and writing, creating it
// (mode 0o600) if missing, never following a symlink.
func openRWBeneath(dir *os.File, name string) (*os.File, bool) {
	if noOpenat2.Load() {
		return nil, false
	}
	how := unix.OpenHow{
		Flags:   unix.O_RDWR | unix.O_CREAT | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Mode:    0o600,
		Resolve: resolveBeneath,
	}
	fd := -1
	err := inDir(dir, func(d int) (err error) {
		fd, err = openat2(d, name, &how)
		return err
	})
	if err != nil {
		return nil, false
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), name)), true
}

// setModeTimeOpen sets f's permission bits and modification time through
// its descriptor: no name to resolve, where Chmod and Chtimes resolve the
// parent each. It reports false, having changed nothing or only the mode,
// where it can't; the caller then sets both by name.
func setModeTimeOpen(f *os.File, mode fs.FileMode, mtime time.Time) bool {
	ts, err := unix.TimeToTimespec(mtime)
	if err != nil || f.Chmod(mode&fs.ModePerm) != nil {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	times := [2]unix.Timespec{ts, ts}
	var errno unix.Errno
	if rc.Control(func(fd uintptr) {
		// utimensat with no path is futimens: the descriptor's file.
		_, _, errno = unix.Syscall6(unix.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&times[0])), 0, 0, 0)
	}) != nil {
		return false
	}
	return errno == 0
}
