package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Setting returns the value stored under key, or ErrNotFound.
func (db *DB) Setting(ctx context.Context, key string) (string, error) {
	var v string
	err := db.sql.QueryRowContext(ctx, "SELECT value FROM settings WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("setting %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("reading setting %q: %w", key, err)
	}
	return v, nil
}

// SetSetting stores value under key, replacing any previous value. The key
// must not be empty.
func (db *DB) SetSetting(ctx context.Context, key, value string) error {
	if key == "" {
		return fmt.Errorf("setting a setting: %w: empty key", ErrConstraint)
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
		return err
	})
	if err != nil {
		return fmt.Errorf("setting %q: %w", key, err)
	}
	return nil
}

// DeleteSetting removes key, or returns ErrNotFound if it is not set.
func (db *DB) DeleteSetting(ctx context.Context, key string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx, "DELETE FROM settings WHERE key = ?", key))
	})
	if err != nil {
		return fmt.Errorf("deleting setting %q: %w", key, err)
	}
	return nil
}
