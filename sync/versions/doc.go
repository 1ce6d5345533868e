// Package versions keeps the old copies of files on a trusted device:
// Syncthing's file versioning for lockstep.
//
// When the sync engine is about to replace or delete a local file because of
// a peer's change, it first calls [Archive.Save], which moves the file into
// the folder's archive directory [Dir] as a plain file that a person can find
// without the tool: "a/b.txt" becomes ".lockstep/versions/a/b~20260102-030405.txt".
// [Archive.List] and [Archive.Restore] read the archive back, and
// [Archive.Clean] applies the folder's [Policy].
//
// Invariants:
//   - Every file access goes through an [fsys.FS], so nothing is read or
//     written outside the folder and no write follows a symlink: a symlink
//     planted anywhere on the archive path makes Save fail rather than move
//     the file elsewhere.
//   - Save renames; it never copies, and it never overwrites an existing
//     archived file: a second version in the same second gets a counter.
//   - Archived names are parsed strictly ([ParseID]). A file in the archive
//     whose name does not decode to a version of a valid folder name, and
//     anything that is not a regular file, is invisible to List and never
//     removed by Clean.
//   - Clean removes only versions its policy drops, and afterwards only the
//     directories that removal left empty, up to but not including Dir.
//
// Times in archived names are UTC with one-second resolution.
//
// The package starts no goroutines. An Archive is safe for concurrent use;
// a local process renaming files in the archive at the same moment can still
// race Save's choice of a free name.
package versions

import "errors"

// Errors returned, wrapped, by this package. Match them with errors.Is.
var (
	// ErrNoVersioning: the policy is "none", so Save kept nothing; the
	// caller deletes or replaces the file as it would without versioning.
	ErrNoVersioning = errors.New("versioning is off")
	// ErrInvalidPolicy: ParsePolicy was given an unknown type or a value
	// out of range. Permanent.
	ErrInvalidPolicy = errors.New("invalid versioning policy")
	// ErrInvalidID: a version ID does not name an archived version.
	// Permanent.
	ErrInvalidID = errors.New("invalid version ID")
	// ErrNotFile: Save was asked to keep something that is not a regular
	// file (a directory or a symlink). The caller handles it without
	// versioning.
	ErrNotFile = errors.New("not a regular file")
)
