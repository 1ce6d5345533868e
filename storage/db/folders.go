package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// FolderType says how a folder syncs.
type FolderType string

// The folder types. Encrypted is a receiver's folder: it holds ciphertext.
const (
	SendReceive FolderType = "sendreceive"
	SendOnly    FolderType = "sendonly"
	ReceiveOnly FolderType = "receiveonly"
	Encrypted   FolderType = "encrypted"
)

// Valid reports whether t is one of the folder types.
func (t FolderType) Valid() bool {
	switch t {
	case SendReceive, SendOnly, ReceiveOnly, Encrypted:
		return true
	}
	return false
}

// Folder is a synced folder.
type Folder struct {
	ID    string
	Label string
	// Path is the folder's root on this node.
	Path      string
	Type      FolderType
	CreatedAt time.Time
	Paused    bool
	// Error is the folder's last error, empty when it is healthy.
	Error string
}

// PutFolder inserts f or updates the folder with its ID. A zero CreatedAt
// means now for a new folder and "unchanged" for an existing one. An empty
// ID or an unknown Type fails with ErrConstraint.
func (db *DB) PutFolder(ctx context.Context, f Folder) error {
	if f.ID == "" {
		return fmt.Errorf("putting folder: %w: empty folder ID", ErrConstraint)
	}
	if !f.Type.Valid() {
		return fmt.Errorf("putting folder %q: %w: type %q is not sendreceive, sendonly, receiveonly or encrypted", f.ID, ErrConstraint, f.Type)
	}
	created := nanos(f.CreatedAt)
	if created == 0 {
		created = nanos(time.Now())
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO folders (id, label, path, type, created_at, paused, error)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET
				label = excluded.label,
				path = excluded.path,
				type = excluded.type,
				created_at = CASE WHEN ? THEN excluded.created_at ELSE folders.created_at END,
				paused = excluded.paused,
				error = excluded.error`,
			f.ID, f.Label, f.Path, string(f.Type), created, boolInt(f.Paused), f.Error,
			!f.CreatedAt.IsZero())
		return err
	})
	if err != nil {
		return fmt.Errorf("putting folder %q: %w", f.ID, err)
	}
	return nil
}

const folderColumns = "id, label, path, type, created_at, paused, error"

// scanFolder reads one row of folderColumns.
func scanFolder(row interface{ Scan(...any) error }) (Folder, error) {
	var (
		f       Folder
		typ     string
		created int64
		paused  int
	)
	if err := row.Scan(&f.ID, &f.Label, &f.Path, &typ, &created, &paused, &f.Error); err != nil {
		return Folder{}, err
	}
	f.Type, f.CreatedAt, f.Paused = FolderType(typ), fromNanos(created), paused != 0
	return f, nil
}

// Folder returns the folder with the given ID, or ErrNotFound.
func (db *DB) Folder(ctx context.Context, id string) (Folder, error) {
	f, err := scanFolder(db.sql.QueryRowContext(ctx, "SELECT "+folderColumns+" FROM folders WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Folder{}, fmt.Errorf("folder %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Folder{}, fmt.Errorf("reading folder %q: %w", id, err)
	}
	return f, nil
}

// Folders returns every folder, ordered by ID.
func (db *DB) Folders(ctx context.Context) ([]Folder, error) {
	rows, err := db.sql.QueryContext(ctx, "SELECT "+folderColumns+" FROM folders ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("listing folders: %w", err)
	}
	defer rows.Close()
	var out []Folder
	for rows.Next() {
		f, err := scanFolder(rows)
		if err != nil {
			return nil, fmt.Errorf("listing folders: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing folders: %w", err)
	}
	return out, nil
}

// RemoveFolder deletes the folder with its shares and file records, or
// returns ErrNotFound. Pending offers of the same folder ID stay: the
// device still offers it.
func (db *DB) RemoveFolder(ctx context.Context, id string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx, "DELETE FROM folders WHERE id = ?", id))
	})
	if err != nil {
		return fmt.Errorf("removing folder %q: %w", id, err)
	}
	return nil
}

// ShareFolder shares the folder with the device. Sharing twice is not an
// error. An unknown folder or device fails with ErrConstraint.
func (db *DB) ShareFolder(ctx context.Context, folderID, deviceID string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := exists(ctx, tx, "folders", folderID); err != nil {
			return fmt.Errorf("%w: unknown folder", ErrConstraint)
		}
		if err := exists(ctx, tx, "devices", deviceID); err != nil {
			return fmt.Errorf("%w: unknown device", ErrConstraint)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO folder_shares (folder_id, device_id)
			VALUES (?, ?) ON CONFLICT DO NOTHING`, folderID, deviceID)
		return err
	})
	if err != nil {
		return fmt.Errorf("sharing folder %q with device %q: %w", folderID, deviceID, err)
	}
	return nil
}

// exists returns nil if table has a row with the given id, ErrNotFound if
// not. table is one of this package's constants, never user input.
func exists(ctx context.Context, tx *sql.Tx, table, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, existsQuery(table), id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// existsQuery selects 1 if table holds the row of an id.
func existsQuery(table string) string { return "SELECT 1 FROM " + table + " WHERE id = ?" }

// UnshareFolder stops sharing the folder with the device, or returns
// ErrNotFound if it was not shared with it.
func (db *DB) UnshareFolder(ctx context.Context, folderID, deviceID string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx,
			"DELETE FROM folder_shares WHERE folder_id = ? AND device_id = ?", folderID, deviceID))
	})
	if err != nil {
		return fmt.Errorf("unsharing folder %q with device %q: %w", folderID, deviceID, err)
	}
	return nil
}

// FolderDevices returns the IDs of the devices the folder is shared with,
// sorted; ErrNotFound if there is no such folder.
func (db *DB) FolderDevices(ctx context.Context, folderID string) ([]string, error) {
	// One statement, so the folder's existence and its shares come from
	// the same snapshot.
	ids, err := db.column(ctx, `
		SELECT s.device_id FROM folders f
		LEFT JOIN folder_shares s ON s.folder_id = f.id
		WHERE f.id = ? ORDER BY s.device_id`, folderID)
	if err != nil {
		return nil, fmt.Errorf("listing devices of folder %q: %w", folderID, err)
	}
	return ids, nil
}

// DeviceFolders returns the IDs of the folders shared with the device,
// sorted; ErrNotFound if there is no such device.
func (db *DB) DeviceFolders(ctx context.Context, deviceID string) ([]string, error) {
	ids, err := db.column(ctx, `
		SELECT s.folder_id FROM devices d
		LEFT JOIN folder_shares s ON s.device_id = d.id
		WHERE d.id = ? ORDER BY s.folder_id`, deviceID)
	if err != nil {
		return nil, fmt.Errorf("listing folders of device %q: %w", deviceID, err)
	}
	return ids, nil
}

// column runs a LEFT JOIN query whose rows hold one nullable string: no
// rows means the left side is missing (ErrNotFound), a single NULL means it
// has no matches. The result is never nil on success.
func (db *DB) column(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := db.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := false
	out := []string{}
	for rows.Next() {
		found = true
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		if s.Valid {
			out = append(out, s.String)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	return out, nil
}
