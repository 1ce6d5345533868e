// Package scan finds what changed in a folder: a walker that compares the
// folder with the local index and hashes what changed, a recursive fsnotify
// watcher that says where to look, and the .lockstepignore matcher both use.
//
// Scan walks the folder in name order and merges the walk with the index
// (Known.EachLocal, also in name order), so each record is read once and a
// record the walk does not meet is a deletion. Files whose size, mtime and
// inode match the index are not read; the others are cut by chunk.Splitter
// and hashed on Options.Workers goroutines.
//
// Invariants:
//   - Symlinks are never followed: a symlink is a record with its target;
//     the walk descends only into real directories, and a subtree scan whose
//     path has a symlink or a non-directory among its parents treats the
//     path as gone.
//   - Every record Scan reports has a name that fsys.ValidName accepts
//     (NFC, no reserved component). Names on disk that fail it, special
//     files (devices, FIFOs, sockets) and files that keep changing while
//     hashed are skipped and reported to Options.OnSkip.
//   - Nothing outside the scanned paths is reported, and a deletion is only
//     reported for a name that is known, not ignored, and absent from a
//     directory that was listed successfully: an entry that could not be
//     read, a directory that could not be listed, an ignored or a skipped
//     name never turns into deletions of what the index holds there. A
//     folder root that cannot be listed fails the scan.
//   - Ignored names are out of scope: neither changes nor deletions are
//     reported for them, so adding an ignore pattern never deletes a file
//     on other devices.
//   - The records of one file come from one consistent read: its size and
//     mtime are the same before and after hashing, and its blocks cover
//     exactly Size bytes.
//   - Scan's goroutines end before it returns; Watcher's end before Serve
//     returns. The Matcher is immutable and safe for concurrent use.
//
// Names on disk that are not NFC (for example written by a macOS program
// as NFD) are skipped rather than renamed or normalized: on Linux the NFC
// and NFD spellings are two different files, and syncing either under the
// other's name could overwrite one with the other.
package scan
