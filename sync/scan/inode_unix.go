//go:build unix

package scan

import (
	"io/fs"
	"syscall"
)

// inodeOf returns the inode number of fi, 0 if the system does not say.
func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
