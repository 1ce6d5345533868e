//go:build !unix

package fsys

import (
	"io/fs"
	"os"
	"time"
)

// chtimesNoFollow sets the access and modification times of name to
// mtime. Where links cannot get their own times, symlinks are skipped.
func chtimesNoFollow(root *os.Root, name string, mtime time.Time) error {
	fi, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	return root.Chtimes(name, mtime, mtime)
}
