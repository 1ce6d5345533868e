package db

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// fileLock is an exclusive flock(2) on a lock file that holds the owner's
// pid. flock locks belong to the open file description, so a second open of
// the same file conflicts even inside one process, and the kernel releases
// the lock when the owner exits, however it exits.
//
// The lock file is never removed: unlinking it would let a process that
// opened the old file and one that creates a new one both "hold" the lock.
type fileLock struct {
	f *os.File
}

// acquireLock takes the lock at path without waiting. When another holder
// has it, the error wraps ErrLocked and names the holder's pid if the file
// records one.
func acquireLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, lockedError(f)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// Record our pid for the error message of whoever comes next. It is
	// informative only, so a failure to write it is not fatal.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &fileLock{f: f}, nil
}

// flock retries flock(2) when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// lockedError builds the ErrLocked error, naming the holder's pid when the
// lock file records one.
func lockedError(f *os.File) error {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, ok := parseLockPID(buf[:n])
	switch {
	case !ok:
		return ErrLocked
	case pid == os.Getpid():
		return fmt.Errorf("%w (pid %d, this process)", ErrLocked, pid)
	default:
		return fmt.Errorf("%w (pid %d)", ErrLocked, pid)
	}
}

// parseLockPID reads the pid a lock file holds: decimal digits, optionally
// surrounded by white space. Anything else, or a pid that is not positive,
// yields ok == false.
func parseLockPID(b []byte) (pid int, ok bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil || n <= 0 {
		return 0, false
	}
	return int(n), true
}

// release empties, unlocks and closes the lock file, so a stale pid is
// never reported.
func (l *fileLock) release() error {
	l.f.Truncate(0)
	if err := flock(l.f, unix.LOCK_UN); err != nil {
		l.f.Close()
		return fmt.Errorf("unlocking: %w", err)
	}
	return l.f.Close()
}
