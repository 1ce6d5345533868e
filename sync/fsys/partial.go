package fsys

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
)

// partialPrefix starts the names of partial files: temp files that keep
// what a pull of one file has written, so that a pull interrupted by a
// crash resumes instead of starting over.
const partialPrefix = TempPrefix + "partial-"

// PartialName is the name of the partial file of name, beside it.
func PartialName(name string) string {
	sum := sha256.Sum256([]byte(path.Base(name)))
	return path.Join(path.Dir(name), partialPrefix+hex.EncodeToString(sum[:8]))
}

// IsPartial reports whether base, the last component of a name, is the
// name of a partial file (which IsTemp reports too).
func IsPartial(base string) bool { return strings.HasPrefix(base, partialPrefix) }

// OpenPartial opens the partial file of name for reading and writing,
// creating it empty if there is none, and returns it with its
// folder-relative name. Its content, if any, is what an earlier pull
// wrote: the caller checks every part against its hash before using it.
func (r *Root) OpenPartial(name string) (File, string, error) {
	p := PartialName(name)
	if r.dir != nil && checkPath(name, false) == nil {
		if f, ok := openRWBeneath(r.dir, p); ok {
			return &file{File: f, name: p}, p, nil
		}
	}
	if err := r.checkWrite("openpartial", p); err != nil {
		return nil, "", err
	}
	if fi, err := r.root.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		return nil, "", &fs.PathError{Op: "openpartial", Path: p, Err: ErrIsSymlink}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", err
	}
	f, err := r.root.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, "", err
	}
	return &file{File: f, name: p}, p, nil
}
