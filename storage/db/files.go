package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// LocalDevice is the device ID under which this node's own file records are
// stored. Using "" rather than the node's device ID keeps the index valid if
// the identity is ever replaced, and no peer's canonical ID is empty.
const LocalDevice = ""

// FileType is the kind of a file record.
type FileType string

// The file types.
const (
	TypeFile    FileType = "file"
	TypeDir     FileType = "dir"
	TypeSymlink FileType = "symlink"
)

// Valid reports whether t is one of the file types.
func (t FileType) Valid() bool {
	return t == TypeFile || t == TypeDir || t == TypeSymlink
}

// FileRecord is one device's record of one file in a folder. Version and
// Chunks are encoded by sync/index; this package stores them as opaque
// bytes.
type FileRecord struct {
	// Name is the folder-relative name; not empty.
	Name string
	Type FileType
	// Size is not negative.
	Size int64
	Mode uint32
	// ModTime must be representable as int64 unix nanoseconds (years 1678
	// to 2262); it is read back in UTC with full precision.
	ModTime  time.Time
	Deleted  bool
	Version  []byte
	Chunks   []byte
	Sequence int64
	// Target is a symlink's target.
	Target string
	// ModifiedBy is the short ID of the device that made the version; Inode
	// and Flags are local details. All three are opaque here (stored as
	// their int64 bit pattern).
	ModifiedBy uint64
	Inode      uint64
	Flags      uint32
}

// Earliest and latest times int64 nanoseconds since 1970 can hold.
var (
	minModTime = time.Unix(0, math.MinInt64)
	maxModTime = time.Unix(0, math.MaxInt64)
)

// check returns why r cannot be stored, or nil.
func (r *FileRecord) check() error {
	switch {
	case r.Name == "":
		return errors.New("empty name")
	case !r.Type.Valid():
		return fmt.Errorf("type %q is not file, dir or symlink", r.Type)
	case r.Size < 0:
		return fmt.Errorf("negative size %d", r.Size)
	case r.Sequence < 0:
		return fmt.Errorf("negative sequence %d", r.Sequence)
	case r.ModTime.Before(minModTime) || r.ModTime.After(maxModTime):
		return fmt.Errorf("modification time %v is out of range", r.ModTime)
	}
	return nil
}

// PutFiles stores recs as deviceID's records in the folder, in one
// transaction: all of them or none. A record replaces the device's record
// of the same name; a name repeated within recs ends with its last record.
// An unknown folder or an invalid record fails with ErrConstraint.
func (db *DB) PutFiles(ctx context.Context, folderID, deviceID string, recs []FileRecord) error {
	for i := range recs {
		if err := recs[i].check(); err != nil {
			return fmt.Errorf("putting files in folder %q: record %q: %w: %w", folderID, recs[i].Name, ErrConstraint, err)
		}
	}
	err := db.updateRaw(ctx, func(ctx context.Context, tx *rawConn) error {
		if err := tx.exists(ctx, "folders", folderID); err != nil {
			return fmt.Errorf("%w: unknown folder", ErrConstraint)
		}
		for i := range recs {
			r := &recs[i]
			err := tx.exec(ctx, putFileSQL, folderID, deviceID, r.Name, string(r.Type), r.Size,
				int64(r.Mode), r.ModTime.UnixNano(), int64(boolInt(r.Deleted)),
				nonNil(r.Version), nonNil(r.Chunks), r.Sequence, r.Target,
				int64(r.ModifiedBy), int64(r.Inode), int64(r.Flags))
			if err != nil {
				return fmt.Errorf("record %q: %w", r.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("putting files of device %q in folder %q: %w", deviceID, folderID, err)
	}
	return nil
}

// putFileSQL stores one record (PutFiles). The driver keeps it prepared
// on each connection: prepared per call, it cost a node 0.3-0.4 s of CPU
// at 100,000 files pulled, a pull's records and a peer's index arriving a
// few hundred at a time.
const putFileSQL = `
	INSERT INTO files (folder_id, device_id, name, type, size, mode, mtime_ns,
		deleted, version, chunks, sequence, target, modified_by, inode, flags)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (folder_id, device_id, name) DO UPDATE SET
		type = excluded.type, size = excluded.size, mode = excluded.mode,
		mtime_ns = excluded.mtime_ns, deleted = excluded.deleted,
		version = excluded.version, chunks = excluded.chunks,
		sequence = excluded.sequence, target = excluded.target,
		modified_by = excluded.modified_by, inode = excluded.inode,
		flags = excluded.flags`

// nonNil returns b, or an empty slice for nil: the driver would bind nil as
// NULL, which the NOT NULL blob columns refuse.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

const fileColumns = "name, type, size, mode, mtime_ns, deleted, version, chunks, sequence, target, modified_by, inode, flags"

// scanFile reads fileColumns, followed by any extra destinations.
func scanFile(row interface{ Scan(...any) error }, extra ...any) (FileRecord, error) {
	var (
		r        FileRecord
		typ      string
		mode, ns int64
		deleted  int
		by, ino  int64
		flags    int64
	)
	dest := append([]any{&r.Name, &typ, &r.Size, &mode, &ns, &deleted, &r.Version, &r.Chunks, &r.Sequence,
		&r.Target, &by, &ino, &flags}, extra...)
	if err := row.Scan(dest...); err != nil {
		return FileRecord{}, err
	}
	r.Type, r.Mode, r.Deleted = FileType(typ), uint32(mode), deleted != 0
	r.ModifiedBy, r.Inode, r.Flags = uint64(by), uint64(ino), uint32(flags)
	r.ModTime = time.Unix(0, ns).UTC()
	return r, nil
}

// File returns deviceID's record of name in the folder, or ErrNotFound.
func (db *DB) File(ctx context.Context, folderID, deviceID, name string) (FileRecord, error) {
	row := db.sql.QueryRowContext(ctx, "SELECT "+fileColumns+
		" FROM files WHERE folder_id = ? AND device_id = ? AND name = ?", folderID, deviceID, name)
	r, err := scanFile(row)
	if errors.Is(err, sql.ErrNoRows) {
		return FileRecord{}, fmt.Errorf("file %q of device %q in folder %q: %w", name, deviceID, folderID, ErrNotFound)
	}
	if err != nil {
		return FileRecord{}, fmt.Errorf("reading file %q of device %q in folder %q: %w", name, deviceID, folderID, err)
	}
	return r, nil
}

// filePage is how many records FilesSince and Files read per statement.
const filePage = 1000

// FilesSince calls fn for each of deviceID's records in the folder whose
// Sequence is greater than after, in ascending Sequence order (equal
// sequences in a stable order). An unknown folder simply has no records.
// Only this node's records (LocalDevice) are indexed by sequence; a
// peer's are sorted for each page, which is slow for many (Files reads
// them in name order).
//
// Records are read in pages, each a consistent snapshot, and no statement
// is open while fn runs, so fn may use db, writes included. A record
// written during the iteration is seen if its new sequence lies ahead of
// the iteration, and is not seen twice otherwise. If fn returns an error,
// the iteration stops and FilesSince returns that error unwrapped.
func (db *DB) FilesSince(ctx context.Context, folderID, deviceID string, after int64, fn func(FileRecord) error) error {
	query, args := localPageQuery, []any{folderID}
	if deviceID != LocalDevice {
		query, args = peerPageQuery, []any{folderID, deviceID}
	}
	return db.eachPage(ctx, folderID, deviceID, query, func(last *FileRecord, rowid int64) []any {
		if last == nil {
			return slices.Concat(args, []any{after, int64(math.MaxInt64), filePage})
		}
		return slices.Concat(args, []any{last.Sequence, rowid, filePage})
	}, fn)
}

// localPageQuery and peerPageQuery select a page of FilesSince: records
// ordered by (sequence, rowid) that come after (seq, rowid). The partial
// index files_sequence holds exactly the order of this node's records (an
// index ends with the rowid), so each page is a range scan, not a sort.
// It names this node's device ID itself: the planner takes a partial
// index only for a query whose terms imply its own.
const (
	localPageQuery = "SELECT " + fileColumns + ", rowid FROM files" +
		" WHERE folder_id = ? AND device_id = '' AND (sequence, rowid) > (?, ?)" +
		" ORDER BY sequence, rowid LIMIT ?"
	peerPageQuery = "SELECT " + fileColumns + ", rowid FROM files" +
		" WHERE folder_id = ? AND device_id = ? AND (sequence, rowid) > (?, ?)" +
		" ORDER BY sequence, rowid LIMIT ?"
	// namePageQuery selects a page of Files, along the primary key.
	namePageQuery = "SELECT " + fileColumns + ", rowid FROM files" +
		" WHERE folder_id = ? AND device_id = ? AND name > ? ORDER BY name LIMIT ?"
)

// Files calls fn for each of deviceID's records in the folder, in name
// order, read in pages along the primary key, as FilesSince reads them.
// If fn returns an error, the iteration stops and Files returns it
// unwrapped.
func (db *DB) Files(ctx context.Context, folderID, deviceID string, fn func(FileRecord) error) error {
	return db.eachPage(ctx, folderID, deviceID, namePageQuery, func(last *FileRecord, _ int64) []any {
		after := ""
		if last != nil {
			after = last.Name
		}
		return []any{folderID, deviceID, after, filePage}
	}, fn)
}

// eachPage reads query's records of deviceID in the folder a page of
// filePage at a time, the first page's arguments args(nil, 0), each next
// page's args of the last record of the page before and its rowid, and
// calls fn for each record between pages, so that no statement is open
// while fn runs. An error of fn comes back unwrapped.
func (db *DB) eachPage(ctx context.Context, folderID, deviceID, query string, args func(last *FileRecord, rowid int64) []any, fn func(FileRecord) error) error {
	var (
		last  *FileRecord
		rowid int64
	)
	for {
		page, lastRowid, err := db.filePage(ctx, query, args(last, rowid)...)
		if err != nil {
			return fmt.Errorf("listing files of device %q in folder %q: %w", deviceID, folderID, err)
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < filePage {
			return nil
		}
		last, rowid = &page[len(page)-1], lastRowid
	}
}

// filePage runs query, which selects fileColumns and the rowid, and
// returns the records and the rowid of the last one.
func (db *DB) filePage(ctx context.Context, query string, args ...any) ([]FileRecord, int64, error) {
	rows, err := db.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var (
		page []FileRecord
		last int64
	)
	for rows.Next() {
		r, err := scanFile(rows, &last)
		if err != nil {
			return nil, 0, err
		}
		page = append(page, r)
	}
	return page, last, rows.Err()
}

// MaxSequence returns the highest Sequence among deviceID's records in the
// folder, or 0 when it has none.
func (db *DB) MaxSequence(ctx context.Context, folderID, deviceID string) (int64, error) {
	var seq int64
	err := db.sql.QueryRowContext(ctx,
		"SELECT coalesce(max(sequence), 0) FROM files WHERE folder_id = ? AND device_id = ?",
		folderID, deviceID).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("reading highest sequence of device %q in folder %q: %w", deviceID, folderID, err)
	}
	return seq, nil
}

// FileDevices lists the devices that have records in the folder, the local
// device ("") included when it has any.
func (db *DB) FileDevices(ctx context.Context, folderID string) ([]string, error) {
	out, err := db.column(ctx, "SELECT DISTINCT device_id FROM files WHERE folder_id = ? ORDER BY device_id", folderID)
	if errors.Is(err, ErrNotFound) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing devices with files in folder %q: %w", folderID, err)
	}
	return out, nil
}

// DeleteFiles drops all of deviceID's records in the folder: a peer whose
// index must be fetched again from scratch.
func (db *DB) DeleteFiles(ctx context.Context, folderID, deviceID string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM files WHERE folder_id = ? AND device_id = ?", folderID, deviceID)
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting files of device %q in folder %q: %w", deviceID, folderID, err)
	}
	return nil
}
