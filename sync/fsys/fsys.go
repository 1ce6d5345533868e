// Package fsys is the narrow filesystem the sync engine uses for everything
// inside a synced folder.
//
// [Root] is the real implementation, built on [os.Root]; [Faulty] wraps any
// [FS] and injects faults (disk full, EIO, a crash after N bytes, slow
// writes) for tests. [ValidName] is the policy for names that come from peers
// or the scanner.
//
// Invariants:
//   - No name given to a Root reaches outside its directory: os.Root contains
//     every operation, and names that are absolute, contain "..", empty or "."
//     components, NUL or '\' are refused before any system call.
//   - Writes never follow a symlink. On Linux, CreateTemp, Rename, Remove,
//     Chmod and Chtimes first try one openat2 of the parent that refuses
//     every symlink and every way out (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)
//     and act relative to it; whatever that refuses, and every write
//     elsewhere, goes the careful way: every parent component of the name is
//     checked with Lstat, and a symlink there fails with [ErrSymlinkParent].
//     Both ways give the same results and errors. The final component is
//     never followed either: Rename and Remove act on a link itself, Chmod
//     skips links, Chtimes sets a link's own time (or skips links where the
//     system cannot).
//   - Open, ReadDir and SyncDir refuse a final symlink ([ErrIsSymlink]) and
//     verify that the object opened is the one Lstat saw. Reads resolve
//     symlinked parents that stay inside the folder (os.Root refuses the
//     others); that exposes nothing a peer could not name directly.
//   - A name accepted by ValidName is accepted by every FS method, and never
//     names the internal directory [InternalDir] or a temp file ([TempPrefix]).
//     The engine's own names for those pass the FS methods but not ValidName.
//
// The checks are made against the directory as it is at the time of the
// call. A local process racing the engine can still redirect an operation
// to another place inside the folder (never outside it); peers cannot,
// because the engine applies their changes one system call at a time.
//
// The package starts no goroutines. Root and Faulty are safe for concurrent
// use.
package fsys

import (
	"errors"
	"io"
	"io/fs"
	"time"
)

// Errors returned, wrapped, by this package. Match them with errors.Is.
var (
	// ErrInvalidName: a name is malformed, escapes the folder, or is
	// reserved. Permanent: retrying the same name fails again.
	ErrInvalidName = errors.New("invalid name")
	// ErrSymlinkParent: a parent component of a name to be written is a
	// symlink. Permanent until the local tree changes.
	ErrSymlinkParent = errors.New("parent is a symlink")
	// ErrIsSymlink: the final component is a symlink where a file or
	// directory is required.
	ErrIsSymlink = errors.New("is a symlink")
	// ErrNotRegular: Open was asked for something that is not a regular
	// file (a directory, device, FIFO or socket).
	ErrNotRegular = errors.New("not a regular file")
	// ErrReplaced: the object at a name changed between the check and the
	// open. Retryable.
	ErrReplaced = errors.New("replaced while opening")
)

// FS is the folder as the engine sees it. Names are folder-relative,
// '/'-separated paths; "." names the folder itself where a method allows it
// (Lstat, ReadDir, SyncDir). Errors are *fs.PathError or *os.LinkError
// values and match fs.ErrNotExist, fs.ErrExist and the package's ErrX
// values with errors.Is.
type FS interface {
	// Lstat describes name; a symlink is described, never followed.
	Lstat(name string) (fs.FileInfo, error)
	// Open opens the regular file name read-only. A symlink fails with
	// ErrIsSymlink, anything else that is not a regular file with
	// ErrNotRegular.
	Open(name string) (File, error)
	// ReadDir lists the directory name, sorted by entry name. A symlink
	// fails with ErrIsSymlink.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Readlink returns the target of the symlink name, as stored.
	Readlink(name string) (string, error)
	// CreateTemp creates a new, empty file in the directory of name, named
	// TempPrefix followed by random characters, and returns it open for
	// reading and writing together with its folder-relative name. The
	// caller closes the file and renames or removes it.
	CreateTemp(name string) (File, string, error)
	// Rename atomically replaces to with from. If from or to is a symlink,
	// the link itself is moved or replaced.
	Rename(from, to string) error
	// Remove removes a file, a symlink (not its target) or an empty
	// directory.
	Remove(name string) error
	// MkdirAll creates the directory name and any missing parents with the
	// permission bits of perm (before umask). A symlink anywhere in name
	// fails: ErrSymlinkParent for a parent, ErrIsSymlink for name itself.
	MkdirAll(name string, perm fs.FileMode) error
	// Symlink creates name as a symlink to target. Target is stored as
	// given and never resolved or checked.
	Symlink(target, name string) error
	// Chmod sets the permission bits (mode & 0o777) of name. On a symlink
	// it does nothing: link modes are not portable.
	Chmod(name string, mode fs.FileMode) error
	// Chtimes sets the modification (and access) time of name. On a
	// symlink it sets the link's own time where the system can, and
	// otherwise does nothing.
	Chtimes(name string, mtime time.Time) error
	// SyncDir flushes the directory name (its entries) to stable storage.
	SyncDir(name string) error
	// Sync is a durability barrier for the whole filesystem holding the
	// folder: when it returns, everything written before is on stable
	// storage (syncfs(2) on Linux; elsewhere see Root.Sync).
	Sync() error
}

// File is an open file of an FS. Name returns the folder-relative name it
// was opened or created with.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	Stat() (fs.FileInfo, error)
	Sync() error
	Truncate(size int64) error
	Name() string
}
