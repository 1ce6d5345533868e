package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// SealedIDSize is the length of an origin device ID, a file key and an
// encrypted chunk ID in the receiver tables.
const SealedIDSize = 32

// SealedRecord is one sealed record an untrusted receiver holds for an
// encrypted folder. The receiver cannot open Sealed; everything else is
// readable.
type SealedRecord struct {
	// Seq is the record's position in the folder's log, > 0.
	Seq int64
	// Origin is the device that sealed the record (32 bytes).
	Origin []byte
	// Counter is the origin's record counter, unique per origin and
	// folder; at most math.MaxInt64.
	Counter uint64
	// FileKey groups the versions of one file (32 bytes).
	FileKey []byte
	Sealed  []byte
	// Deleted: the record is a deletion (readable for retention).
	Deleted bool
	// Chunks is the concatenation of the 32-byte IDs of the sealed chunks
	// the record references.
	Chunks []byte
	// StoredAt is when the first receiver stored the record.
	StoredAt time.Time
}

// PackIDSize is the length of a pack ID.
const PackIDSize = 16

// SealedChunk is one sealed chunk a receiver stores: a blob of its own, or
// Size bytes at Offset in the pack Pack.
type SealedChunk struct {
	ID       []byte // 32 bytes
	Size     int64  // > 0
	StoredAt time.Time
	Pack     []byte // PackIDSize bytes, or nil for a chunk stored on its own
	Offset   int64  // >= 0, the chunk's offset in Pack; 0 when Pack is nil
}

// check returns why c cannot be stored, or nil.
func (c *SealedChunk) check() error {
	switch {
	case len(c.ID) != SealedIDSize || c.Size <= 0:
		return fmt.Errorf("ID of %d bytes, size %d", len(c.ID), c.Size)
	case c.Pack != nil && len(c.Pack) != PackIDSize:
		return fmt.Errorf("pack ID of %d bytes", len(c.Pack))
	case c.Offset < 0 || c.Pack == nil && c.Offset != 0:
		return fmt.Errorf("offset %d", c.Offset)
	}
	return nil
}

// packOffset returns c's pack offset column, NULL when it is not packed.
func (c *SealedChunk) packOffset() any {
	if c.Pack == nil {
		return nil
	}
	return c.Offset
}

// ReceiverStats are a receiver folder's storage figures.
type ReceiverStats struct {
	Records         int64 // records held, every version
	Files           int64 // distinct file keys
	Chunks          int64 // chunks held
	StoredBytes     int64 // sum of the chunks' sizes
	ReferencedBytes int64 // sum over records of the sizes of the chunks each references
	LogSequence     int64 // the log's highest sequence, 0 when empty
}

// SealedOrigin sums up the records one device sealed in a folder.
type SealedOrigin struct {
	Origin     []byte
	MaxCounter uint64
	LastStored time.Time
}

// check returns why r cannot be stored, or nil.
func (r *SealedRecord) check() error {
	switch {
	case r.Seq <= 0:
		return fmt.Errorf("log sequence %d is not positive", r.Seq)
	case len(r.Origin) != SealedIDSize:
		return fmt.Errorf("origin of %d bytes", len(r.Origin))
	case len(r.FileKey) != SealedIDSize:
		return fmt.Errorf("file key of %d bytes", len(r.FileKey))
	case len(r.Chunks)%SealedIDSize != 0:
		return fmt.Errorf("chunk list of %d bytes is not a multiple of %d", len(r.Chunks), SealedIDSize)
	case r.Counter > math.MaxInt64:
		return fmt.Errorf("counter %d out of range", r.Counter)
	}
	return nil
}

// ReceiverLogID returns the ID of the folder's record log, or ErrNotFound
// when the folder has none.
func (db *DB) ReceiverLogID(ctx context.Context, folderID string) (uint64, error) {
	var id int64
	err := db.sql.QueryRowContext(ctx, "SELECT log_id FROM receiver_logs WHERE folder_id = ?", folderID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("log of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("reading log of folder %q: %w", folderID, err)
	}
	return uint64(id), nil
}

// InitReceiverLog gives the folder the log ID id unless it already has
// one, and returns the ID the folder has afterwards. id must not be 0; an
// unknown folder fails with ErrConstraint.
func (db *DB) InitReceiverLog(ctx context.Context, folderID string, id uint64) (uint64, error) {
	if id == 0 {
		return 0, fmt.Errorf("creating log of folder %q: %w: log ID 0", folderID, ErrConstraint)
	}
	var got int64
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO receiver_logs (folder_id, log_id)
			VALUES (?, ?) ON CONFLICT DO NOTHING`, folderID, int64(id)); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT log_id FROM receiver_logs WHERE folder_id = ?", folderID).Scan(&got)
	})
	if err != nil {
		return 0, fmt.Errorf("creating log of folder %q: %w", folderID, err)
	}
	return uint64(got), nil
}

// ReceiverSequence returns the highest log sequence of the folder's
// records, 0 when there are none.
func (db *DB) ReceiverSequence(ctx context.Context, folderID string) (int64, error) {
	var seq int64
	err := db.sql.QueryRowContext(ctx,
		"SELECT coalesce(max(seq), 0) FROM receiver_records WHERE folder_id = ?", folderID).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("reading log sequence of folder %q: %w", folderID, err)
	}
	return seq, nil
}

// HasSealedChunk reports whether the folder holds the sealed chunk id.
func (db *DB) HasSealedChunk(ctx context.Context, folderID string, id []byte) (bool, error) {
	var one int
	err := db.sql.QueryRowContext(ctx,
		"SELECT 1 FROM receiver_chunks WHERE folder_id = ? AND id = ?", folderID, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up sealed chunk of folder %q: %w", folderID, err)
	}
	return true, nil
}

// heldBatch bounds the values one lookup query asks about.
const heldBatch = 500

// SealedChunksHeld returns which of ids the folder holds, keyed by the ID
// as a string: one query per heldBatch IDs, where an ingest of thousands
// of small files would otherwise make a query per chunk.
func (db *DB) SealedChunksHeld(ctx context.Context, folderID string, ids [][]byte) (map[string]bool, error) {
	vals := make([]any, len(ids))
	for i, id := range ids {
		vals[i] = id
	}
	held := make(map[string]bool)
	err := db.inBatches(ctx, "SELECT id FROM receiver_chunks WHERE folder_id = ? AND id IN (", []any{folderID}, vals, func(rows *sql.Rows) error {
		var id []byte
		err := rows.Scan(&id)
		held[string(id)] = true
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("looking up sealed chunks of folder %q: %w", folderID, err)
	}
	return held, nil
}

// SealedCountersHeld returns which of counters the folder holds records
// of origin with: one query per heldBatch counters.
func (db *DB) SealedCountersHeld(ctx context.Context, folderID string, origin []byte, counters []uint64) (map[uint64]bool, error) {
	vals := make([]any, 0, len(counters))
	for _, c := range counters {
		if c <= math.MaxInt64 { // none larger is stored
			vals = append(vals, int64(c))
		}
	}
	held := make(map[uint64]bool)
	err := db.inBatches(ctx, "SELECT counter FROM receiver_records WHERE folder_id = ? AND origin = ? AND counter IN (", []any{folderID, origin}, vals, func(rows *sql.Rows) error {
		var c int64
		err := rows.Scan(&c)
		held[uint64(c)] = true
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("looking up sealed records of folder %q: %w", folderID, err)
	}
	return held, nil
}

// inBatches runs query, which ends in "IN (", once for every heldBatch of
// vals, with args before them, and calls fn for each row.
func (db *DB) inBatches(ctx context.Context, query string, args, vals []any, fn func(*sql.Rows) error) error {
	for start := 0; start < len(vals); start += heldBatch {
		part := vals[start:min(start+heldBatch, len(vals))]
		q := query + "?" + strings.Repeat(", ?", len(part)-1) + ")"
		rows, err := db.sql.QueryContext(ctx, q, append(slices.Clip(args), part...)...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err = fn(rows); err != nil {
				break
			}
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// SealedChunkSize returns the stored size of the folder's sealed chunk
// id, or ErrNotFound.
func (db *DB) SealedChunkSize(ctx context.Context, folderID string, id []byte) (int64, error) {
	var size int64
	err := db.sql.QueryRowContext(ctx,
		"SELECT size FROM receiver_chunks WHERE folder_id = ? AND id = ?", folderID, id).Scan(&size)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("sealed chunk of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("looking up sealed chunk of folder %q: %w", folderID, err)
	}
	return size, nil
}

// AppendSealed adds chunks and then recs to the folder in one transaction.
// Chunks already held are left as they are. The records' log sequences
// must increase and be above the folder's highest one, every chunk a
// record references must be held afterwards, and no record may repeat an
// (origin, counter) the folder holds; otherwise nothing is stored and the
// error wraps ErrConstraint.
func (db *DB) AppendSealed(ctx context.Context, folderID string, recs []SealedRecord, chunks []SealedChunk) error {
	for i := range chunks {
		if err := chunks[i].check(); err != nil {
			return fmt.Errorf("appending to folder %q: %w: chunk %d: %v", folderID, ErrConstraint, i, err)
		}
	}
	for i := range recs {
		if err := recs[i].check(); err != nil {
			return fmt.Errorf("appending to folder %q: %w: record %d: %v", folderID, ErrConstraint, i, err)
		}
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, c := range chunks {
			if _, err := tx.ExecContext(ctx, `INSERT INTO receiver_chunks (folder_id, id, size, stored_at, pack, pack_offset)
				VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, folderID, c.ID, c.Size, nanos(c.StoredAt),
				c.Pack, c.packOffset()); err != nil {
				return err
			}
		}
		var last int64
		if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(seq), 0) FROM receiver_records WHERE folder_id = ?",
			folderID).Scan(&last); err != nil {
			return err
		}
		for i, r := range recs {
			if r.Seq <= last {
				return fmt.Errorf("%w: record %d: log sequence %d not above %d", ErrConstraint, i, r.Seq, last)
			}
			last = r.Seq
			ref, err := referencedBytes(ctx, tx, folderID, r.Chunks)
			if err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO receiver_records
				(folder_id, seq, origin, counter, file_key, sealed, chunks, ref_bytes, stored_at, deleted)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				folderID, r.Seq, r.Origin, int64(r.Counter), r.FileKey, nonNil(r.Sealed), nonNil(r.Chunks),
				ref, nanos(r.StoredAt), boolInt(r.Deleted)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("appending to folder %q: %w", folderID, err)
	}
	return nil
}

// referencedBytes sums the sizes of the chunks listed in ids, failing with
// ErrConstraint when one is not held.
func referencedBytes(ctx context.Context, tx *sql.Tx, folderID string, ids []byte) (int64, error) {
	var sum int64
	for off := 0; off < len(ids); off += SealedIDSize {
		var size int64
		err := tx.QueryRowContext(ctx, "SELECT size FROM receiver_chunks WHERE folder_id = ? AND id = ?",
			folderID, ids[off:off+SealedIDSize]).Scan(&size)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("%w: references chunk %x, which is not held", ErrConstraint, ids[off:off+SealedIDSize])
		}
		if err != nil {
			return 0, err
		}
		sum += size
	}
	return sum, nil
}

// SealedRecordsAfter returns up to limit of the folder's records with log
// sequence above after, in log order.
func (db *DB) SealedRecordsAfter(ctx context.Context, folderID string, after int64, limit int) ([]SealedRecord, error) {
	recs, err := db.sealedRecords(ctx, sealedRecordColumns+` WHERE folder_id = ? AND seq > ? ORDER BY seq LIMIT ?`, folderID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading log of folder %q: %w", folderID, err)
	}
	return recs, nil
}

// sealedRecordColumns selects what sealedRecords scans.
const sealedRecordColumns = `SELECT seq, origin, counter, file_key, sealed, chunks, stored_at, deleted FROM receiver_records`

// sealedRecords runs a query starting with sealedRecordColumns and reads
// its rows.
func (db *DB) sealedRecords(ctx context.Context, query string, args ...any) ([]SealedRecord, error) {
	rows, err := db.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SealedRecord
	for rows.Next() {
		var (
			r                        SealedRecord
			counter, stored, deleted int64
		)
		if err := rows.Scan(&r.Seq, &r.Origin, &counter, &r.FileKey, &r.Sealed, &r.Chunks, &stored, &deleted); err != nil {
			return nil, err
		}
		r.Counter, r.StoredAt, r.Deleted = uint64(counter), fromNanos(stored), deleted != 0
		out = append(out, r)
	}
	return out, rows.Err()
}

// SealedChunks calls fn for every chunk the folder holds, ordered by ID,
// until fn returns an error, which SealedChunks returns.
func (db *DB) SealedChunks(ctx context.Context, folderID string, fn func(SealedChunk) error) error {
	rows, err := db.sql.QueryContext(ctx, sealedChunkColumns+" WHERE folder_id = ? ORDER BY id", folderID)
	if err != nil {
		return fmt.Errorf("listing chunks of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := scanSealedChunk(rows)
		if err != nil {
			return fmt.Errorf("listing chunks of folder %q: %w", folderID, err)
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listing chunks of folder %q: %w", folderID, err)
	}
	return nil
}

// SealedOrigins returns, per device that sealed records of the folder, its
// highest counter and when its last record was stored, ordered by origin.
func (db *DB) SealedOrigins(ctx context.Context, folderID string) ([]SealedOrigin, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT origin, max(counter), max(stored_at)
		FROM receiver_records WHERE folder_id = ? GROUP BY origin ORDER BY origin`, folderID)
	if err != nil {
		return nil, fmt.Errorf("listing origins of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	var out []SealedOrigin
	for rows.Next() {
		var (
			o       SealedOrigin
			counter int64
			stored  int64
		)
		if err := rows.Scan(&o.Origin, &counter, &stored); err != nil {
			return nil, fmt.Errorf("listing origins of folder %q: %w", folderID, err)
		}
		o.MaxCounter, o.LastStored = uint64(counter), fromNanos(stored)
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing origins of folder %q: %w", folderID, err)
	}
	return out, nil
}

// ReceiverStats returns the folder's storage figures, all 0 for a folder
// that holds nothing.
func (db *DB) ReceiverStats(ctx context.Context, folderID string) (ReceiverStats, error) {
	var s ReceiverStats
	err := db.sql.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM receiver_records WHERE folder_id = ?1),
		(SELECT count(DISTINCT file_key) FROM receiver_records WHERE folder_id = ?1),
		(SELECT coalesce(sum(ref_bytes), 0) FROM receiver_records WHERE folder_id = ?1),
		(SELECT coalesce(max(seq), 0) FROM receiver_records WHERE folder_id = ?1),
		(SELECT count(*) FROM receiver_chunks WHERE folder_id = ?1),
		(SELECT coalesce(sum(size), 0) FROM receiver_chunks WHERE folder_id = ?1)`, folderID).
		Scan(&s.Records, &s.Files, &s.ReferencedBytes, &s.LogSequence, &s.Chunks, &s.StoredBytes)
	if err != nil {
		return ReceiverStats{}, fmt.Errorf("reading figures of folder %q: %w", folderID, err)
	}
	return s, nil
}

// ReceiverEnvelope returns the folder's envelope and its generation, or
// ErrNotFound when it has none.
func (db *DB) ReceiverEnvelope(ctx context.Context, folderID string) ([]byte, int64, error) {
	var (
		env []byte
		gen int64
	)
	err := db.sql.QueryRowContext(ctx,
		"SELECT envelope, generation FROM receiver_envelopes WHERE folder_id = ?", folderID).Scan(&env, &gen)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, fmt.Errorf("envelope of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading envelope of folder %q: %w", folderID, err)
	}
	return env, gen, nil
}

// PutReceiverEnvelope stores env as the folder's envelope of generation
// gen. gen must be above the generation held (if any) and env not empty,
// else nothing changes and the error wraps ErrConstraint, as it does for
// an unknown folder.
func (db *DB) PutReceiverEnvelope(ctx context.Context, folderID string, env []byte, gen int64) error {
	if len(env) == 0 || gen <= 0 {
		return fmt.Errorf("putting envelope of folder %q: %w: %d bytes, generation %d", folderID, ErrConstraint, len(env), gen)
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO receiver_envelopes (folder_id, envelope, generation)
			VALUES (?, ?, ?)
			ON CONFLICT (folder_id) DO UPDATE SET envelope = excluded.envelope, generation = excluded.generation
			WHERE excluded.generation > receiver_envelopes.generation`, folderID, env, gen)
		if err := mustAffect(res, err); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%w: generation %d is not above the one held", ErrConstraint, gen)
		} else if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("putting envelope of folder %q: %w", folderID, err)
	}
	return nil
}
