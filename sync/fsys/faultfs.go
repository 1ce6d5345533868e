package fsys

import (
	"errors"
	"io/fs"
	"sync"
	"syscall"
	"time"
)

// ErrCrashed is returned, wrapped, by every operation of a Faulty after its
// simulated crash.
var ErrCrashed = errors.New("simulated crash")

// Op names a kind of operation of an FS or a File, for Faulty.FailOp.
type Op string

// Operations that Faulty counts.
const (
	OpLstat      Op = "lstat"
	OpOpen       Op = "open"
	OpReadDir    Op = "readdir"
	OpReadlink   Op = "readlink"
	OpCreateTemp Op = "createtemp"
	OpRename     Op = "rename"
	OpRemove     Op = "remove"
	OpMkdirAll   Op = "mkdirall"
	OpSymlink    Op = "symlink"
	OpChmod      Op = "chmod"
	OpChtimes    Op = "chtimes"
	OpSyncDir    Op = "syncdir"
	OpSync       Op = "sync"     // FS.Sync
	OpRead       Op = "read"     // File.Read and File.ReadAt
	OpWrite      Op = "write"    // File.Write and File.WriteAt
	OpFileSync   Op = "filesync" // File.Sync
	OpTruncate   Op = "truncate" // File.Truncate
	OpStat       Op = "stat"     // File.Stat
	OpClose      Op = "close"    // File.Close
)

// Faulty wraps an FS and injects faults for tests: the disk filling up
// after N more bytes (DiskFullAfter), a crash after N more bytes
// (CrashAfter), an error on the Nth operation of a kind (FailOp), and slow
// writes (SlowWrites). The zero value with FS set passes everything
// through. Configure it before or during use; it is safe for concurrent
// use. Bytes are counted over all files opened through it.
type Faulty struct {
	FS FS

	mu       sync.Mutex
	written  int64          // bytes written through f
	full     byteLimit      // the disk is full at this total
	crash    byteLimit      // f crashes at this total
	crashed  bool           // every operation fails with ErrCrashed
	slow     time.Duration  // sleep before each write
	count    map[Op]int     // calls so far, per kind
	failures map[Op]failure // one pending failure per kind
}

// byteLimit is a total of bytes written, if on.
type byteLimit struct {
	on bool
	at int64
}

type failure struct {
	at  int // the call number that fails
	err error
}

var _ FS = (*Faulty)(nil)

// DiskFullAfter makes the disk full once n more bytes have been written:
// the write that crosses the limit writes what fits and fails with an error
// wrapping syscall.ENOSPC, as do all later writes. Other operations go on.
func (f *Faulty) DiskFullAfter(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.full = byteLimit{on: true, at: f.written + max(n, 0)}
}

// CrashAfter makes f crash once n more bytes have been written: the write
// that crosses the limit writes what fits (a torn write) and fails, and
// from then on every operation fails with ErrCrashed. What was written
// stays in the underlying directory, so a test can "restart" on it.
func (f *Faulty) CrashAfter(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crash = byteLimit{on: true, at: f.written + max(n, 0)}
}

// FailOp makes the nth call of kind op from now on (n >= 1) fail with err,
// wrapped in an *fs.PathError, without reaching the FS. It replaces any
// failure still pending for op; later calls succeed again.
func (f *Faulty) FailOp(op Op, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures == nil {
		f.failures = make(map[Op]failure)
	}
	f.failures[op] = failure{at: f.count[op] + max(n, 1), err: err}
}

// SlowWrites makes each File.Write and File.WriteAt sleep for d first.
func (f *Faulty) SlowWrites(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slow = d
}

// Written returns the number of bytes written through f so far.
func (f *Faulty) Written() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written
}

// Crashed reports whether f has crashed.
func (f *Faulty) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// enter counts a call of op on name and returns the error it must fail
// with, if any.
func (f *Faulty) enter(op Op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return pathError(string(op), name, ErrCrashed)
	}
	if f.count == nil {
		f.count = make(map[Op]int)
	}
	f.count[op]++
	if fl, ok := f.failures[op]; ok && fl.at == f.count[op] {
		delete(f.failures, op)
		return pathError(string(op), name, fl.err)
	}
	return nil
}

// reserve grants up to n bytes of a write. If fewer are granted, limit is
// the error to return after writing them.
func (f *Faulty) reserve(n int) (granted int, limit error, slow time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	granted = n
	for _, l := range []byteLimit{f.full, f.crash} {
		if l.on {
			granted = int(min(int64(granted), max(l.at-f.written, 0)))
		}
	}
	f.written += int64(granted)
	if granted < n {
		limit = syscall.ENOSPC
		if f.crash.on && f.written >= f.crash.at {
			f.crashed = true
			limit = ErrCrashed
		}
	}
	return granted, limit, f.slow
}

// unreserve gives back bytes granted but not written.
func (f *Faulty) unreserve(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written -= int64(n)
}

// Lstat implements FS.
func (f *Faulty) Lstat(name string) (fs.FileInfo, error) {
	if err := f.enter(OpLstat, name); err != nil {
		return nil, err
	}
	return f.FS.Lstat(name)
}

// Open implements FS; the file it returns is faulty too.
func (f *Faulty) Open(name string) (File, error) {
	if err := f.enter(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{fs: f, file: file}, nil
}

// ReadDir implements FS.
func (f *Faulty) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.enter(OpReadDir, name); err != nil {
		return nil, err
	}
	return f.FS.ReadDir(name)
}

// Readlink implements FS.
func (f *Faulty) Readlink(name string) (string, error) {
	if err := f.enter(OpReadlink, name); err != nil {
		return "", err
	}
	return f.FS.Readlink(name)
}

// CreateTemp implements FS; the file it returns is faulty too.
func (f *Faulty) CreateTemp(name string) (File, string, error) {
	if err := f.enter(OpCreateTemp, name); err != nil {
		return nil, "", err
	}
	file, tmp, err := f.FS.CreateTemp(name)
	if err != nil {
		return nil, "", err
	}
	return &faultyFile{fs: f, file: file}, tmp, nil
}

// Rename implements FS.
func (f *Faulty) Rename(from, to string) error {
	if err := f.enter(OpRename, to); err != nil {
		return err
	}
	return f.FS.Rename(from, to)
}

// Remove implements FS.
func (f *Faulty) Remove(name string) error {
	if err := f.enter(OpRemove, name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

// MkdirAll implements FS.
func (f *Faulty) MkdirAll(name string, perm fs.FileMode) error {
	if err := f.enter(OpMkdirAll, name); err != nil {
		return err
	}
	return f.FS.MkdirAll(name, perm)
}

// Symlink implements FS.
func (f *Faulty) Symlink(target, name string) error {
	if err := f.enter(OpSymlink, name); err != nil {
		return err
	}
	return f.FS.Symlink(target, name)
}

// Chmod implements FS.
func (f *Faulty) Chmod(name string, mode fs.FileMode) error {
	if err := f.enter(OpChmod, name); err != nil {
		return err
	}
	return f.FS.Chmod(name, mode)
}

// Chtimes implements FS.
func (f *Faulty) Chtimes(name string, mtime time.Time) error {
	if err := f.enter(OpChtimes, name); err != nil {
		return err
	}
	return f.FS.Chtimes(name, mtime)
}

// SyncDir implements FS.
func (f *Faulty) SyncDir(name string) error {
	if err := f.enter(OpSyncDir, name); err != nil {
		return err
	}
	return f.FS.SyncDir(name)
}

// Sync implements FS.
func (f *Faulty) Sync() error {
	if err := f.enter(OpSync, "."); err != nil {
		return err
	}
	return f.FS.Sync()
}
