package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// A trusted device's state of each folder and peer it syncs the folder
// with: the index ID the peer announced, and an envelope waiting for a
// receiver to accept the folder. Each dies with its folder and with its
// device; writing one for an unknown folder or device fails with
// ErrConstraint.

// PeerIndexID returns the index ID the device last announced for the
// folder (a receiver's is its log ID), or ErrNotFound when it announced
// none.
func (db *DB) PeerIndexID(ctx context.Context, folderID, deviceID string) (uint64, error) {
	var id int64
	err := db.sql.QueryRowContext(ctx, "SELECT index_id FROM peer_index_ids WHERE folder_id = ? AND device_id = ?",
		folderID, deviceID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("index ID of device %q for folder %q: %w", deviceID, folderID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("reading index ID of device %q for folder %q: %w", deviceID, folderID, err)
	}
	return uint64(id), nil
}

// SetPeerIndexID stores the index ID the device announced for the folder,
// replacing the one before. An ID of 0 fails with ErrConstraint.
func (db *DB) SetPeerIndexID(ctx context.Context, folderID, deviceID string, id uint64) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO peer_index_ids (folder_id, device_id, index_id) VALUES (?, ?, ?)
			ON CONFLICT (folder_id, device_id) DO UPDATE SET index_id = excluded.index_id`,
			folderID, deviceID, int64(id))
		return err
	})
	if err != nil {
		return fmt.Errorf("setting index ID of device %q for folder %q: %w", deviceID, folderID, err)
	}
	return nil
}

// PendingEnvelope returns the envelope sealed for the receiver until it
// accepts the folder, or ErrNotFound when none is waiting.
func (db *DB) PendingEnvelope(ctx context.Context, folderID, deviceID string) ([]byte, error) {
	var env []byte
	err := db.sql.QueryRowContext(ctx, "SELECT envelope FROM pending_envelopes WHERE folder_id = ? AND device_id = ?",
		folderID, deviceID).Scan(&env)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("pending envelope of folder %q for device %q: %w", folderID, deviceID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading pending envelope of folder %q for device %q: %w", folderID, deviceID, err)
	}
	return env, nil
}

// SetPendingEnvelope keeps env for the receiver until it accepts the
// folder, replacing any envelope waiting. An empty env fails with
// ErrConstraint.
func (db *DB) SetPendingEnvelope(ctx context.Context, folderID, deviceID string, env []byte) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO pending_envelopes (folder_id, device_id, envelope) VALUES (?, ?, ?)
			ON CONFLICT (folder_id, device_id) DO UPDATE SET envelope = excluded.envelope`,
			folderID, deviceID, env)
		return err
	})
	if err != nil {
		return fmt.Errorf("setting pending envelope of folder %q for device %q: %w", folderID, deviceID, err)
	}
	return nil
}

// DeletePendingEnvelope drops the envelope waiting for the receiver, or
// returns ErrNotFound when none is.
func (db *DB) DeletePendingEnvelope(ctx context.Context, folderID, deviceID string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx, "DELETE FROM pending_envelopes WHERE folder_id = ? AND device_id = ?",
			folderID, deviceID))
	})
	if err != nil {
		return fmt.Errorf("deleting pending envelope of folder %q for device %q: %w", folderID, deviceID, err)
	}
	return nil
}
