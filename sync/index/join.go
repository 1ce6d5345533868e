package index

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// JoinFile is where a recovery leaves what a device needs to keep syncing
// the recovered folder as its devices did: under the folder's own
// directory (".lockstep", never synced), read once when the folder is
// added and then removed.
const JoinFile = ".lockstep/join.json"

// JoinHint is what a recovered folder knows of how it was synced.
type JoinHint struct {
	// Version of this format.
	Version int `json:"version"`
	// Folder is the folder's ID.
	Folder string `json:"folder"`
	// Polynomial is the chunking polynomial the folder's devices use, so
	// that a device joining with the recovered files cuts them into the
	// same chunks: nothing is sent again that a receiver holds.
	Polynomial uint64 `json:"polynomial"`
}

const joinVersion = 1

// WriteJoinHint writes h into the folder at dir, atomically and durably.
func WriteJoinHint(dir string, h JoinHint) error {
	h.Version = joinVersion
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, filepath.FromSlash(JoinFile))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "join-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadJoinHint reads the hint in the folder at dir; ok is false when
// there is none.
func ReadJoinHint(dir string) (h JoinHint, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(JoinFile)))
	if errors.Is(err, fs.ErrNotExist) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, false, fmt.Errorf("reading %s: %w", JoinFile, err)
	}
	if h.Version != joinVersion {
		return h, false, fmt.Errorf("reading %s: unknown version %d", JoinFile, h.Version)
	}
	return h, true, nil
}

// RemoveJoinHint removes the hint in the folder at dir, once applied.
func RemoveJoinHint(dir string) error {
	err := os.Remove(filepath.Join(dir, filepath.FromSlash(JoinFile)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
