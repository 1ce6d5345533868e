//go:build !linux

package local

import (
	"errors"
	"os"
)

// haveSyncfs says that syncfs(2) is missing, so Sync fsyncs the paths
// PutUnsynced touched.
const haveSyncfs = false

func (s *Store) syncfs() error {
	return errors.ErrUnsupported
}

// renameNoReplace renames tmp to final, failing with blob.ErrExist if final
// exists, through a hard link.
func (s *Store) renameNoReplace(_ *os.File, tmp, final string) error {
	return s.linkNoReplace(tmp, final)
}

// startWriteback does nothing where sync_file_range does not exist; Sync
// flushes everything.
func startWriteback(*os.File) {}
