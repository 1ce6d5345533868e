//go:build !linux

package fsys

import "os"

// syncFilesystem flushes the directory d. Without syncfs(2) there is no
// portable per-filesystem barrier; see Root.Sync.
func syncFilesystem(d *os.File) error {
	return d.Sync()
}

// StartWriteback does nothing where sync_file_range does not exist; the
// barrier flushes everything.
func StartWriteback(File, int64, int) {}

// DropWritten does nothing where sync_file_range does not exist.
func DropWritten(File, int64, int64) {}
