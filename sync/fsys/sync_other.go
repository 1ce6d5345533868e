//go:build !linux

package fsys

import "os"

// syncFilesystem flushes the directory d. Without syncfs(2) there is no
// portable per-filesystem barrier; see Root.Sync.
func syncFilesystem(d *os.File) error {
	return d.Sync()
}
