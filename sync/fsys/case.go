package fsys

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"strings"
	"syscall"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// CaseInsensitive reports whether the folder's filesystem took a name that
// differs only in case for the same entry when r was opened.
func (r *Root) CaseInsensitive() bool {
	return r.caseInsensitive
}

// probeCase tells whether the folder's filesystem is case-insensitive: by
// creating a temp file, or, if the folder is not writable, by looking at an
// existing entry.
func (r *Root) probeCase() bool {
	if insensitive, ok := r.probeByTemp(); ok {
		return insensitive
	}
	return r.probeByEntry()
}

// probeByTemp creates a lower-case temp file, looks it up by its upper-case
// name and removes it. ok is false if the file could not be created.
func (r *Root) probeByTemp() (insensitive, ok bool) {
	name := fmt.Sprintf("%scase-%016x", TempPrefix, rand.Uint64())
	f, err := r.root.OpenFile(name, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, false
	}
	f.Close()
	defer r.root.Remove(name)
	return r.sameEntry(name, strings.ToUpper(name)), true
}

// probeByEntry looks up the first entry of the folder that has letters
// under its case-swapped name. With no such entry it reports false.
func (r *Root) probeByEntry() bool {
	d, err := r.root.Open(".")
	if err != nil {
		return false
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(64)
		for _, e := range entries {
			if swapped := swapCase(e.Name()); swapped != e.Name() {
				return r.sameEntry(e.Name(), swapped)
			}
		}
		if err != nil {
			return false
		}
	}
}

// sameEntry reports whether a and b name the same existing entry.
func (r *Root) sameEntry(a, b string) bool {
	fa, err := r.root.Lstat(a)
	if err != nil {
		return false
	}
	fb, err := r.root.Lstat(b)
	return err == nil && os.SameFile(fa, fb)
}

// CaseConflict reports an existing entry that a case-insensitive filesystem
// would take for name or for one of its parents, though its name differs:
// for "Docs/a.txt" it returns "docs" if that exists, or "Docs/A.txt". The
// engine refuses to write a name with a conflict. On a case-sensitive
// filesystem it always returns "". Names are compared with Unicode simple
// case folding after NFC normalization; a filesystem whose folding differs
// (for example one folding "ß" to "ss") can still match names this misses.
// On a case-insensitive filesystem it reads each directory along name up
// to the entry sought.
func (r *Root) CaseConflict(name string) (existing string, err error) {
	if err := checkPath(name, false); err != nil {
		return "", pathError("caseconflict", name, err)
	}
	if !r.caseInsensitive {
		return "", nil
	}
	dir := "."
	for c := range strings.SplitSeq(name, "/") {
		other, found, err := r.lookupFold(dir, c)
		if err != nil || other != "" || !found {
			return other, err // nothing deeper can exist if c does not
		}
		dir = path.Join(dir, c)
	}
	return "", nil
}

// lookupFold scans dir for base. It returns found if base is there exactly,
// or dir/e for an entry e that differs from base but folds to the same
// name. A dir that does not exist or is not a directory holds nothing.
func (r *Root) lookupFold(dir, base string) (other string, found bool, err error) {
	d, err := r.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			switch {
			case e.Name() == base:
				return "", true, nil
			case sameFold(e.Name(), base):
				return path.Join(dir, e.Name()), false, nil
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ENOTDIR) {
			return "", false, nil
		}
		if err != nil {
			return "", false, pathError("caseconflict", dir, err)
		}
	}
}

// sameFold reports whether a and b differ but a case-insensitive filesystem
// could take them for the same name.
func sameFold(a, b string) bool {
	return a != b && strings.EqualFold(norm.NFC.String(a), norm.NFC.String(b))
}

// swapCase returns s with upper- and lower-case letters exchanged.
func swapCase(s string) string {
	return strings.Map(func(c rune) rune {
		if unicode.IsUpper(c) {
			return unicode.ToLower(c)
		}
		return unicode.ToUpper(c)
	}, s)
}
