package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Everyday changes to a known device or folder, each one statement, so
// that a concurrent PutDevice or PutFolder cannot undo them by writing
// back what it read before.

// SetDevicePaused pauses or resumes the device; ErrNotFound if unknown.
func (db *DB) SetDevicePaused(ctx context.Context, id string, paused bool) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx, "UPDATE devices SET paused = ? WHERE id = ?", boolInt(paused), id))
	})
	if err != nil {
		return fmt.Errorf("pausing device %q: %w", id, err)
	}
	return nil
}

// RenameDevice sets the name this node knows the device by; ErrNotFound
// if unknown.
func (db *DB) RenameDevice(ctx context.Context, id, name string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx, "UPDATE devices SET name = ? WHERE id = ?", name, id))
	})
	if err != nil {
		return fmt.Errorf("renaming device %q: %w", id, err)
	}
	return nil
}

// SetFolderPaused pauses or resumes the folder; ErrNotFound if unknown.
func (db *DB) SetFolderPaused(ctx context.Context, id string, paused bool) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx, "UPDATE folders SET paused = ? WHERE id = ?", boolInt(paused), id))
	})
	if err != nil {
		return fmt.Errorf("pausing folder %q: %w", id, err)
	}
	return nil
}

// SetFolderType changes how a synced folder syncs: between sendreceive,
// sendonly and receiveonly. An encrypted folder holds ciphertext for
// others and a synced one plaintext, so neither becomes the other
// (ErrConstraint); an unknown folder is ErrNotFound.
func (db *DB) SetFolderType(ctx context.Context, id string, t FolderType) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if t == Encrypted || !t.Valid() {
			return fmt.Errorf("%w: type %q is not sendreceive, sendonly or receiveonly", ErrConstraint, t)
		}
		var cur string
		if err := tx.QueryRowContext(ctx, "SELECT type FROM folders WHERE id = ?", id).Scan(&cur); errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		} else if err != nil {
			return err
		}
		if FolderType(cur) == Encrypted {
			return fmt.Errorf("%w: an encrypted folder holds data for other devices and keeps its type", ErrConstraint)
		}
		_, err := tx.ExecContext(ctx, "UPDATE folders SET type = ? WHERE id = ?", string(t), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("changing the type of folder %q: %w", id, err)
	}
	return nil
}

// LocalNamesFlagged returns the names of the folder's own file records
// (deleted ones too) with any of the flags in mask set, sorted. The flags
// are opaque here; sync/index gives them meaning.
func (db *DB) LocalNamesFlagged(ctx context.Context, folderID string, mask uint32) ([]string, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT name FROM files
		WHERE folder_id = ? AND device_id = ? AND flags & ? <> 0 ORDER BY name`, folderID, LocalDevice, int64(mask))
	if err != nil {
		return nil, fmt.Errorf("listing flagged files of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("listing flagged files of folder %q: %w", folderID, err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing flagged files of folder %q: %w", folderID, err)
	}
	return out, nil
}
