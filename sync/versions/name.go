package versions

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"lockstep/sync/fsys"
)

// stampLayout is the time in an archived name, always UTC.
const stampLayout = "20060102-150405"

// maxSeqDigits bounds the counter parsed from an archived name; Save writes
// at most maxSeq.
const (
	maxSeqDigits = 9
	maxSeq       = 1000
)

// splitExt splits a base name into stem and extension: the extension is
// the last dot and what follows it, except that a leading dot starts no
// extension (".bashrc" has none). The stem is never empty.
func splitExt(base string) (stem, ext string) {
	i := strings.LastIndexByte(base, '.')
	if i <= 0 {
		return base, ""
	}
	return base[:i], base[i:]
}

// archivedBase is the archived name of base for a version saved at t, the
// seq-th in that second (1 for the first): "<stem>~YYYYMMDD-HHMMSS<ext>",
// with "-<seq>" after the time from the second on.
func archivedBase(base string, t time.Time, seq int) (string, error) {
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return "", fmt.Errorf("time %v is outside years 1..9999", t)
	}
	stem, ext := splitExt(base)
	tag := t.Format(stampLayout)
	if seq > 1 {
		tag += "-" + strconv.Itoa(seq)
	}
	return stem + "~" + tag + ext, nil
}

// parseBase decodes an archived base name made by archivedBase. It accepts
// exactly the names archivedBase can make (for any seq >= 1 of at most
// maxSeqDigits digits), so that parseBase and archivedBase round-trip.
func parseBase(archived string) (base string, t time.Time, seq int, ok bool) {
	rest, ext := splitExt(archived)
	i := strings.LastIndexByte(rest, '~')
	if i <= 0 {
		return "", time.Time{}, 0, false
	}
	stem, tag := rest[:i], rest[i+1:]
	seq = 1
	if len(tag) > len(stampLayout) {
		if tag[len(stampLayout)] != '-' {
			return "", time.Time{}, 0, false
		}
		n := tag[len(stampLayout)+1:]
		if len(n) == 0 || len(n) > maxSeqDigits || n[0] == '0' || !allDigits(n) {
			return "", time.Time{}, 0, false
		}
		seq, _ = strconv.Atoi(n)
		if seq < 2 {
			return "", time.Time{}, 0, false
		}
		tag = tag[:len(stampLayout)]
	}
	if len(tag) != len(stampLayout) || !allDigits(tag[:8]) || tag[8] != '-' || !allDigits(tag[9:]) {
		return "", time.Time{}, 0, false
	}
	t, err := time.Parse(stampLayout, tag)
	if err != nil || t.Year() < 1 || t.Format(stampLayout) != tag {
		return "", time.Time{}, 0, false
	}
	// The extension must be one splitExt finds again in the original name:
	// a stem with a later dot, or a dotless-looking stem with an extension,
	// would decode to a name that encodes differently.
	base = stem + ext
	if s, e := splitExt(base); s != stem || e != ext {
		return "", time.Time{}, 0, false
	}
	return base, t, seq, true
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ParseID decodes a version ID (an archived file's name relative to Dir,
// as in Version.ID) into the folder-relative name of the file it is a
// version of, the time it was archived and its counter within that second
// (1 for the first). It checks only the ID, not whether it exists. Errors
// wrap ErrInvalidID.
func ParseID(id string) (name string, archived time.Time, seq int, err error) {
	if fsys.ValidName(id) != nil {
		return "", time.Time{}, 0, fmt.Errorf("%w %q", ErrInvalidID, id)
	}
	dir, archivedName := path.Split(id)
	base, t, seq, ok := parseBase(archivedName)
	if !ok {
		return "", time.Time{}, 0, fmt.Errorf("%w %q: not an archived file name", ErrInvalidID, id)
	}
	name = dir + base
	if fsys.ValidName(name) != nil {
		return "", time.Time{}, 0, fmt.Errorf("%w %q: not a version of a valid name", ErrInvalidID, id)
	}
	return name, t, seq, nil
}
