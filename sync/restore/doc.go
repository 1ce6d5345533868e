// Package restore rebuilds an encrypted folder from an untrusted receiver
// alone: the device that runs it needs nothing but its own identity and the
// folder's password. It is the library behind `lockstep recover`.
//
// Recover dials the receiver (TLS pinned to the receiver's device ID),
// announces the folder with nothing held, so that the receiver sends its
// whole record log, fetches and opens the folder key envelope (taking in
// the log meanwhile, and the first sealed chunks, which the records name
// in the clear: scrypt takes about a second), opens and
// checks every sealed record, keeps the winning version of each name, and
// writes the winners' tree into an empty target directory, fetching and
// checking every chunk.
//
// Invariants:
//   - Nothing is written to disk before the password has opened the folder
//     key: a wrong password leaves no target directory behind.
//   - Every write goes through fsys.Root on the target, so no name from
//     the receiver reaches outside it and no write follows a symlink.
//     Names are checked again (fsys.ValidName) before they are planned.
//   - A file is written only if every one of its chunks opened under the
//     folder key and its plaintext matches the record's block hash and
//     size. A file that fails is not left on disk (its temporary file is
//     removed) and is listed in Result.Damaged; records that fail to open
//     are counted in Result.DamagedRecords. Recover then returns an error
//     wrapping ErrDamaged, after writing everything else.
//   - Files appear under their final names only once complete: each is
//     built in a temporary file beside its name and given its mode and
//     mtime, with no fsync of its own. Once every file is written, one
//     filesystem barrier (fsys.Root.Sync: syncfs(2) on Linux) covers all
//     their data; then they are renamed into place (renameWorkers at a
//     time), symlinks are made, directories get their modes and times, and
//     a last barrier ends the recovery. Files of earlyWritebackSize or more
//     are handed to the kernel's writeback as they are written, and
//     barriers run in the background every syncahead.Every bytes, which
//     only starts earlier what the first barrier waits for. Those files
//     are dropped from the page cache dropBehind behind their part written
//     from the start, once on disk.
//   - At most MaxChunksInFlight chunk requests are outstanding at once,
//     and while the key opens at most
//     prefetchInFlight, fetching the records' chunks until prefetchBudget
//     bytes are held. Those are
//     opened and checked like any other when a file takes them; one never
//     fetched is asked for again.
//     SealedIndex messages are acknowledged as they are processed, so the
//     receiver's flow control keeps the log's memory use bounded per
//     message; the winners of all names are kept in memory.
//   - Every goroutine Recover starts has ended when it returns.
package restore
