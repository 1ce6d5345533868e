package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// MaxPendingFoldersPerDevice bounds the offers kept per device (an
// untrusted receiver's among them): beyond it the device's oldest offer
// makes way.
const MaxPendingFoldersPerDevice = 100

// PendingFolder is a folder a known device offered that this node does not
// have.
type PendingFolder struct {
	DeviceID  string
	FolderID  string
	Label     string
	FirstSeen time.Time
	// Encrypted: the device offers it to this node as an untrusted
	// receiver, so it is accepted as an encrypted folder.
	Encrypted bool
}

// AddPendingFolder records that a known device offers a folder. For an
// offer already recorded it keeps first_seen and updates the label. A zero
// FirstSeen means now. An unknown device fails with ErrConstraint. At most
// MaxPendingFoldersPerDevice offers are kept per device: its oldest (by
// first_seen, then folder ID) go in the same transaction.
func (db *DB) AddPendingFolder(ctx context.Context, p PendingFolder) error {
	if p.FolderID == "" {
		return fmt.Errorf("adding pending folder: %w: empty folder ID", ErrConstraint)
	}
	first := p.FirstSeen
	if first.IsZero() {
		first = time.Now()
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := exists(ctx, tx, "devices", p.DeviceID); err != nil {
			return fmt.Errorf("%w: unknown device", ErrConstraint)
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO pending_folders (device_id, folder_id, label, first_seen, encrypted)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (device_id, folder_id) DO UPDATE SET label = excluded.label, encrypted = excluded.encrypted`,
			p.DeviceID, p.FolderID, p.Label, nanos(first), boolInt(p.Encrypted))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			DELETE FROM pending_folders WHERE device_id = ? AND folder_id IN (
				SELECT folder_id FROM pending_folders WHERE device_id = ?
				ORDER BY first_seen DESC, folder_id DESC LIMIT -1 OFFSET ?)`,
			p.DeviceID, p.DeviceID, MaxPendingFoldersPerDevice)
		return err
	})
	if err != nil {
		return fmt.Errorf("adding folder %q offered by device %q: %w", p.FolderID, p.DeviceID, err)
	}
	return nil
}

// PendingFolders returns every pending offer, ordered by folder ID and then
// device ID.
func (db *DB) PendingFolders(ctx context.Context) ([]PendingFolder, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT device_id, folder_id, label, first_seen, encrypted
		FROM pending_folders ORDER BY folder_id, device_id`)
	if err != nil {
		return nil, fmt.Errorf("listing pending folders: %w", err)
	}
	defer rows.Close()
	var out []PendingFolder
	for rows.Next() {
		var p PendingFolder
		var first, encrypted int64
		if err := rows.Scan(&p.DeviceID, &p.FolderID, &p.Label, &first, &encrypted); err != nil {
			return nil, fmt.Errorf("listing pending folders: %w", err)
		}
		p.FirstSeen = fromNanos(first)
		p.Encrypted = encrypted != 0
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing pending folders: %w", err)
	}
	return out, nil
}

// RemovePendingFolder forgets the device's offer of the folder, or returns
// ErrNotFound.
func (db *DB) RemovePendingFolder(ctx context.Context, deviceID, folderID string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx,
			"DELETE FROM pending_folders WHERE device_id = ? AND folder_id = ?", deviceID, folderID))
	})
	if err != nil {
		return fmt.Errorf("removing folder %q offered by device %q: %w", folderID, deviceID, err)
	}
	return nil
}
