package fsys

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// ErrNoExchange means the file system (or the kernel) cannot swap two
// names atomically; the caller falls back to a plain rename.
var ErrNoExchange = errors.New("atomic exchange not supported")

// RenameNoReplace renames from to to unless to exists, which fails with
// an error matching fs.ErrExist and changes nothing. Where the kernel
// cannot do it in one call it checks first, which leaves a moment in
// which another process could create to.
func (r *Root) RenameNoReplace(from, to string) error {
	if r.dir != nil && checkPath(from, false) == nil && checkPath(to, false) == nil {
		if done, err := renameBeneathFlags(r.dir, from, to, renameNoReplace); done && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOSYS) {
			if err != nil {
				return &fs.PathError{Op: "rename", Path: to, Err: err}
			}
			return nil
		}
	}
	if _, err := r.Lstat(to); err == nil {
		return &fs.PathError{Op: "rename", Path: to, Err: fs.ErrExist}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return r.Rename(from, to)
}

// Exchange swaps the entries a and b atomically: each name then holds
// what the other held, and at no moment does either name hold nothing.
// Both must exist. Where that is not possible it returns ErrNoExchange and
// changes nothing.
func (r *Root) Exchange(a, b string) error {
	if r.dir == nil || checkPath(a, false) != nil || checkPath(b, false) != nil {
		return ErrNoExchange
	}
	done, err := renameBeneathFlags(r.dir, a, b, renameExchange)
	switch {
	case !done, errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EOPNOTSUPP):
		return ErrNoExchange
	case err != nil:
		return fmt.Errorf("exchanging %s and %s: %w", a, b, err)
	}
	return nil
}
