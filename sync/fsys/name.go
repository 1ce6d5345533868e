package fsys

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Reserved names.
const (
	// InternalDir is the folder's own directory for lockstep's data
	// (versions, markers). Peers can never address it.
	InternalDir = ".lockstep"
	// TempPrefix starts the name of every temporary file the engine
	// creates. Files with this prefix are never synced.
	TempPrefix = ".lockstep-tmp-"
)

// Limits on names accepted by ValidName, in bytes.
const (
	MaxComponent = 255
	MaxName      = 4096
)

// ValidName checks a folder-relative name from a peer or the scanner. A
// valid name is non-empty, valid UTF-8 in Unicode normalization form C,
// '/'-separated and relative, has no empty, "." or ".." component, no NUL
// and no '\', no component longer than MaxComponent bytes, at most MaxName
// bytes in all, no component equal to InternalDir and no component starting
// with TempPrefix (both compared case-insensitively, so that a
// case-insensitive filesystem cannot be tricked into writing there).
//
// Errors wrap ErrInvalidName and say why. A valid name is also accepted by
// every FS method, and path.Clean(name) == name.
func ValidName(name string) error {
	if err := checkPath(name, false); err != nil {
		return err
	}
	if len(name) > MaxName {
		return invalid(name, fmt.Sprintf("longer than %d bytes", MaxName))
	}
	if !utf8.ValidString(name) {
		return invalid(name, "not valid UTF-8")
	}
	if !norm.NFC.IsNormalString(name) {
		return invalid(name, "not in Unicode normalization form C")
	}
	for c := range strings.SplitSeq(name, "/") {
		switch {
		case len(c) > MaxComponent:
			return invalid(name, fmt.Sprintf("component longer than %d bytes", MaxComponent))
		case strings.EqualFold(c, InternalDir):
			return invalid(name, "inside the internal directory "+InternalDir)
		case hasPrefixFold(c, TempPrefix):
			return invalid(name, "a temporary file name")
		}
	}
	return nil
}

// IsTemp reports whether base, the last component of a name, is the name of
// a temporary file made by CreateTemp. The comparison is exact: lockstep
// only creates lower-case temp names.
func IsTemp(base string) bool {
	return strings.HasPrefix(base, TempPrefix)
}

// hasPrefixFold reports whether s starts with prefix under Unicode simple
// case folding, rune by rune ("K", the Kelvin sign, matches "k").
func hasPrefixFold(s, prefix string) bool {
	for _, p := range prefix {
		r, size := utf8.DecodeRuneInString(s)
		if size == 0 || !strings.EqualFold(string(r), string(p)) {
			return false
		}
		s = s[size:]
	}
	return true
}

// checkPath rejects names that are structurally unsafe or ambiguous: empty,
// absolute, containing NUL or '\', or with an empty, "." or ".." component.
// "." alone, the folder itself, passes only if root is true. It does not
// check length, encoding or reserved names: those are ValidName's policy,
// and the engine may address InternalDir and temp files.
func checkPath(name string, root bool) error {
	switch {
	case name == ".":
		if root {
			return nil
		}
		return invalid(name, "names the folder itself")
	case name == "":
		return invalid(name, "empty")
	case name[0] == '/':
		return invalid(name, "absolute")
	case strings.IndexByte(name, 0) >= 0:
		return invalid(name, "contains NUL")
	case strings.IndexByte(name, '\\') >= 0:
		return invalid(name, `contains '\'`)
	}
	for c := range strings.SplitSeq(name, "/") {
		switch c {
		case "":
			return invalid(name, "empty component")
		case ".":
			return invalid(name, `"." component`)
		case "..":
			return invalid(name, `".." component`)
		}
	}
	return nil
}

// invalid returns an error wrapping ErrInvalidName. Long names are cut in
// the message so that one hostile name cannot flood a log.
func invalid(name, why string) error {
	const show = 80
	if len(name) > show {
		name = name[:show] + "..."
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidName, name, why)
}
