package db

import (
	"context"
	"fmt"
)

// SealedChunksAfter returns up to limit of the folder's chunk rows with an
// ID above after (nil: from the first), ordered by ID: a page of what a
// check lists.
func (db *DB) SealedChunksAfter(ctx context.Context, folderID string, after []byte, limit int) ([]SealedChunk, error) {
	if after == nil {
		after = []byte{}
	}
	rows, err := db.sql.QueryContext(ctx, sealedChunkColumns+" WHERE folder_id = ? AND id > ? ORDER BY id LIMIT ?", folderID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing chunks of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	var out []SealedChunk
	for rows.Next() {
		c, err := scanSealedChunk(rows)
		if err != nil {
			return nil, fmt.Errorf("listing chunks of folder %q: %w", folderID, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing chunks of folder %q: %w", folderID, err)
	}
	return out, nil
}
