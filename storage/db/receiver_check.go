package db

import (
	"context"
	"fmt"
)

// The queries of a receiver's store check (sync/receiver's Check): pages
// in the order the store lists keys, so the check merges them with the
// listing without holding either whole. Pages are by key (keyset), not
// by an open cursor, so no read transaction stays open across store I/O.

// SealedLooseChunksAfter returns up to limit of the folder's chunk rows
// that place a chunk in a blob of its own (no pack) with an ID above
// after (nil: from the first), ordered by ID: byte order, which is the
// lexical order of the IDs' lower-case hex.
func (db *DB) SealedLooseChunksAfter(ctx context.Context, folderID string, after []byte, limit int) ([]SealedChunk, error) {
	if after == nil {
		after = []byte{}
	}
	rows, err := db.sql.QueryContext(ctx, sealedChunkColumns+
		" WHERE folder_id = ? AND id > ? AND pack IS NULL ORDER BY id LIMIT ?", folderID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing loose chunks of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	var out []SealedChunk
	for rows.Next() {
		c, err := scanSealedChunk(rows)
		if err != nil {
			return nil, fmt.Errorf("listing loose chunks of folder %q: %w", folderID, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing loose chunks of folder %q: %w", folderID, err)
	}
	return out, nil
}

// SealedRefsAfter returns up to limit of the folder's records with log
// sequence above after, in log order, with only Seq and Chunks set: what
// a check needs to tie log objects and chunks to the records needing
// them, without the sealed payloads.
func (db *DB) SealedRefsAfter(ctx context.Context, folderID string, after int64, limit int) ([]SealedRecord, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT seq, chunks FROM receiver_records
		WHERE folder_id = ? AND seq > ? ORDER BY seq LIMIT ?`, folderID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing records of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	var out []SealedRecord
	for rows.Next() {
		var r SealedRecord
		if err := rows.Scan(&r.Seq, &r.Chunks); err != nil {
			return nil, fmt.Errorf("listing records of folder %q: %w", folderID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing records of folder %q: %w", folderID, err)
	}
	return out, nil
}
