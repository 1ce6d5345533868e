package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// PackUsage sums up the chunk rows that place chunks in one pack.
type PackUsage struct {
	Pack      []byte // PackIDSize bytes
	Chunks    int64  // chunk rows in the pack
	LiveBytes int64  // sum of their sizes
}

// sealedChunkColumns selects what scanSealedChunk scans.
const sealedChunkColumns = "SELECT id, size, stored_at, pack, coalesce(pack_offset, 0) FROM receiver_chunks"

// scanSealedChunk reads one row selected by sealedChunkColumns.
func scanSealedChunk(rows interface{ Scan(...any) error }) (SealedChunk, error) {
	var (
		c      SealedChunk
		stored int64
	)
	if err := rows.Scan(&c.ID, &c.Size, &stored, &c.Pack, &c.Offset); err != nil {
		return SealedChunk{}, err
	}
	c.StoredAt = fromNanos(stored)
	return c, nil
}

// SealedChunk returns the folder's chunk row id (where the chunk is
// stored), or ErrNotFound.
func (db *DB) SealedChunk(ctx context.Context, folderID string, id []byte) (SealedChunk, error) {
	c, err := scanSealedChunk(db.sql.QueryRowContext(ctx, sealedChunkColumns+" WHERE folder_id = ? AND id = ?", folderID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return SealedChunk{}, fmt.Errorf("sealed chunk of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return SealedChunk{}, fmt.Errorf("looking up sealed chunk of folder %q: %w", folderID, err)
	}
	return c, nil
}

// SealedPackUsage returns, per pack that holds at least one of the
// folder's chunk rows, how many and how many bytes, ordered by pack ID.
// A pack no row places a chunk in is not listed.
func (db *DB) SealedPackUsage(ctx context.Context, folderID string) ([]PackUsage, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT pack, count(*), sum(size) FROM receiver_chunks
		WHERE folder_id = ? AND pack IS NOT NULL GROUP BY pack ORDER BY pack`, folderID)
	if err != nil {
		return nil, fmt.Errorf("listing packs of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	var out []PackUsage
	for rows.Next() {
		var u PackUsage
		if err := rows.Scan(&u.Pack, &u.Chunks, &u.LiveBytes); err != nil {
			return nil, fmt.Errorf("listing packs of folder %q: %w", folderID, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing packs of folder %q: %w", folderID, err)
	}
	return out, nil
}

// PackedChunks returns the folder's chunk rows that place a chunk in
// pack, ordered by offset.
func (db *DB) PackedChunks(ctx context.Context, folderID string, pack []byte) ([]SealedChunk, error) {
	rows, err := db.sql.QueryContext(ctx, sealedChunkColumns+
		" WHERE folder_id = ? AND pack = ? ORDER BY pack_offset", folderID, pack)
	if err != nil {
		return nil, fmt.Errorf("listing chunks of a pack of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	var out []SealedChunk
	for rows.Next() {
		c, err := scanSealedChunk(rows)
		if err != nil {
			return nil, fmt.Errorf("listing chunks of a pack of folder %q: %w", folderID, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing chunks of a pack of folder %q: %w", folderID, err)
	}
	return out, nil
}

// MoveSealedChunks sets, in one transaction, where each chunk of moves is
// stored (its Pack and Offset; ID names the row, the other fields are
// ignored), for a repack. Every chunk must be held and of the size given,
// else nothing changes and the error wraps ErrConstraint.
func (db *DB) MoveSealedChunks(ctx context.Context, folderID string, moves []SealedChunk) error {
	for i := range moves {
		if err := moves[i].check(); err != nil {
			return fmt.Errorf("moving chunks of folder %q: %w: chunk %d: %v", folderID, ErrConstraint, i, err)
		}
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `UPDATE receiver_chunks SET pack = ?, pack_offset = ?
			WHERE folder_id = ? AND id = ? AND size = ?`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, c := range moves {
			res, err := stmt.ExecContext(ctx, c.Pack, c.packOffset(), folderID, c.ID, c.Size)
			if err := mustAffect(res, err); errors.Is(err, ErrNotFound) {
				return fmt.Errorf("%w: chunk %x of %d bytes is not held", ErrConstraint, c.ID, c.Size)
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("moving chunks of folder %q: %w", folderID, err)
	}
	return nil
}
