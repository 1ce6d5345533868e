package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ReceiverSegment returns where the store keeps the encrypted folder, or
// ErrNotFound before it is set.
func (db *DB) ReceiverSegment(ctx context.Context, folderID string) (string, error) {
	var seg string
	err := db.sql.QueryRowContext(ctx, "SELECT segment FROM receiver_segments WHERE folder_id = ?", folderID).Scan(&seg)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store segment of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store segment of folder %q: %w", folderID, err)
	}
	return seg, nil
}

// InitReceiverSegment sets the folder's store segment unless it has one,
// and returns the one it has. A segment another folder uses is
// ErrConstraint.
func (db *DB) InitReceiverSegment(ctx context.Context, folderID, segment string) (string, error) {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO receiver_segments (folder_id, segment) VALUES (?, ?) ON CONFLICT (folder_id) DO NOTHING", folderID, segment)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("setting the store segment of folder %q: %w", folderID, err)
	}
	return db.ReceiverSegment(ctx, folderID)
}
