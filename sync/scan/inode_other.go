//go:build !unix

package scan

import "io/fs"

// inodeOf returns 0: this system has no inode numbers, so change detection
// relies on size and mtime alone.
func inodeOf(fs.FileInfo) uint64 { return 0 }
