package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// A trusted device's state of each of its folders: the key that seals
// what it sends to receivers, the ID of its index, its chunking
// polynomial and its versioning policy. Each dies with its folder; writing
// one for an unknown folder fails with ErrConstraint.

// FolderKeySize is the length of a folder key.
const FolderKeySize = 32

// FolderKey returns the key of the folder, or ErrNotFound when it has
// none (it was never shared with a receiver).
func (db *DB) FolderKey(ctx context.Context, folderID string) ([FolderKeySize]byte, error) {
	var key [FolderKeySize]byte
	var b []byte
	err := db.sql.QueryRowContext(ctx, "SELECT key FROM folder_keys WHERE folder_id = ?", folderID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return key, fmt.Errorf("key of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return key, fmt.Errorf("reading key of folder %q: %w", folderID, err)
	}
	copy(key[:], b) // the schema holds it to FolderKeySize bytes
	return key, nil
}

// SetFolderKey stores the key of the folder, replacing any it had.
func (db *DB) SetFolderKey(ctx context.Context, folderID string, key [FolderKeySize]byte) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO folder_keys (folder_id, key) VALUES (?, ?)
			ON CONFLICT (folder_id) DO UPDATE SET key = excluded.key`, folderID, key[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("setting key of folder %q: %w", folderID, err)
	}
	return nil
}

// FolderKeyRing returns the folder's key ring, oldest first: its key
// (FolderKey) and the keys rotations added. ErrNotFound when it has none.
func (db *DB) FolderKeyRing(ctx context.Context, folderID string) ([][FolderKeySize]byte, error) {
	first, err := db.FolderKey(ctx, folderID)
	if err != nil {
		return nil, err
	}
	ring := [][FolderKeySize]byte{first}
	rows, err := db.sql.QueryContext(ctx, "SELECT generation, key FROM folder_key_ring WHERE folder_id = ? ORDER BY generation", folderID)
	if err != nil {
		return nil, fmt.Errorf("reading key ring of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var gen int
		var b []byte
		if err := rows.Scan(&gen, &b); err != nil {
			return nil, fmt.Errorf("reading key ring of folder %q: %w", folderID, err)
		}
		if gen != len(ring)+1 {
			return nil, fmt.Errorf("key ring of folder %q: generation %d follows %d", folderID, gen, len(ring))
		}
		ring = append(ring, [FolderKeySize]byte(b))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading key ring of folder %q: %w", folderID, err)
	}
	return ring, nil
}

// SetFolderKeyRing stores the folder's key ring (at least one key),
// replacing what it had.
func (db *DB) SetFolderKeyRing(ctx context.Context, folderID string, ring [][FolderKeySize]byte) error {
	if len(ring) == 0 || len(ring) > 255 {
		return fmt.Errorf("setting key ring of folder %q: %d keys", folderID, len(ring))
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO folder_keys (folder_id, key) VALUES (?, ?)
			ON CONFLICT (folder_id) DO UPDATE SET key = excluded.key`, folderID, ring[0][:]); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM folder_key_ring WHERE folder_id = ?", folderID); err != nil {
			return err
		}
		for i, k := range ring[1:] {
			if _, err := tx.ExecContext(ctx, "INSERT INTO folder_key_ring (folder_id, generation, key) VALUES (?, ?, ?)", folderID, i+2, k[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("setting key ring of folder %q: %w", folderID, err)
	}
	return nil
}

// IndexID returns the ID of this device's index of the folder, or
// ErrNotFound when it has none yet.
func (db *DB) IndexID(ctx context.Context, folderID string) (uint64, error) {
	var id int64
	err := db.sql.QueryRowContext(ctx, "SELECT index_id FROM folder_index_ids WHERE folder_id = ?", folderID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("index ID of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("reading index ID of folder %q: %w", folderID, err)
	}
	return uint64(id), nil
}

// SetIndexID stores the ID of this device's index of the folder,
// replacing any it had. An ID of 0 fails with ErrConstraint.
func (db *DB) SetIndexID(ctx context.Context, folderID string, id uint64) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO folder_index_ids (folder_id, index_id) VALUES (?, ?)
			ON CONFLICT (folder_id) DO UPDATE SET index_id = excluded.index_id`, folderID, int64(id))
		return err
	})
	if err != nil {
		return fmt.Errorf("setting index ID of folder %q: %w", folderID, err)
	}
	return nil
}

// Polynomial returns the folder's chunking polynomial and whether it is
// fixed for good, or ErrNotFound when the folder has none yet.
func (db *DB) Polynomial(ctx context.Context, folderID string) (pol uint64, fixed bool, err error) {
	var p int64
	err = db.sql.QueryRowContext(ctx, "SELECT polynomial, fixed FROM folder_polynomials WHERE folder_id = ?", folderID).Scan(&p, &fixed)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("polynomial of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading polynomial of folder %q: %w", folderID, err)
	}
	return uint64(p), fixed, nil
}

// ErrPolynomialFixed means a write would change a folder's polynomial
// after it was fixed: files were chunked with it.
var ErrPolynomialFixed = errors.New("the folder's chunking polynomial is fixed")

// SetPolynomial stores the folder's chunking polynomial, not fixed, or
// keeps it as it is when it is already pol. It fails with
// ErrPolynomialFixed when the folder has another polynomial that is fixed,
// and with ErrConstraint for pol 0.
func (db *DB) SetPolynomial(ctx context.Context, folderID string, pol uint64) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO folder_polynomials (folder_id, polynomial) VALUES (?, ?)
			ON CONFLICT (folder_id) DO UPDATE SET polynomial = excluded.polynomial
			WHERE NOT fixed OR polynomial = excluded.polynomial`, folderID, int64(pol))
		if err := mustAffect(res, err); errors.Is(err, ErrNotFound) {
			return ErrPolynomialFixed
		} else if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("setting polynomial of folder %q: %w", folderID, err)
	}
	return nil
}

// FixPolynomial marks the folder's polynomial fixed for good, or returns
// ErrNotFound when the folder has none. Fixing it again is not an error.
func (db *DB) FixPolynomial(ctx context.Context, folderID string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx, "UPDATE folder_polynomials SET fixed = 1 WHERE folder_id = ?", folderID))
	})
	if err != nil {
		return fmt.Errorf("fixing polynomial of folder %q: %w", folderID, err)
	}
	return nil
}

// VersioningPolicy is a folder's versioning policy as sync/versions.Policy
// reads it; this layer does not interpret it. Type "" is none.
type VersioningPolicy struct {
	Type       string
	Keep, Days int
}

// VersioningPolicy returns the folder's versioning policy, or ErrNotFound
// when none was set.
func (db *DB) VersioningPolicy(ctx context.Context, folderID string) (VersioningPolicy, error) {
	var p VersioningPolicy
	err := db.sql.QueryRowContext(ctx, "SELECT type, keep, days FROM folder_versioning WHERE folder_id = ?", folderID).
		Scan(&p.Type, &p.Keep, &p.Days)
	if errors.Is(err, sql.ErrNoRows) {
		return VersioningPolicy{}, fmt.Errorf("versioning policy of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return VersioningPolicy{}, fmt.Errorf("reading versioning policy of folder %q: %w", folderID, err)
	}
	return p, nil
}

// SetVersioningPolicy stores the folder's versioning policy, replacing any
// it had. A negative Keep or Days fails with ErrConstraint.
func (db *DB) SetVersioningPolicy(ctx context.Context, folderID string, p VersioningPolicy) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO folder_versioning (folder_id, type, keep, days) VALUES (?, ?, ?, ?)
			ON CONFLICT (folder_id) DO UPDATE SET type = excluded.type, keep = excluded.keep, days = excluded.days`,
			folderID, p.Type, p.Keep, p.Days)
		return err
	})
	if err != nil {
		return fmt.Errorf("setting versioning policy of folder %q: %w", folderID, err)
	}
	return nil
}
