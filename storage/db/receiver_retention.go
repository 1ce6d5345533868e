package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
)

// ReceiverRetention is an encrypted folder's retention policy on a
// receiver (see sync/receiver.Policy for what the numbers mean). Every
// field is >= 0; the zero value keeps everything.
type ReceiverRetention struct {
	KeepLast, KeepHourly, KeepDaily, KeepWeekly, KeepMonthly, KeepYearly int
	KeepDeletedDays                                                      int
}

// OriginCounter is a counter of one origin device (32 bytes).
type OriginCounter struct {
	Origin  []byte
	Counter uint64
}

// ReceiverHighWater holds the marks pruning never lowers: the highest log
// sequence and, per origin, the highest counter a folder ever held.
type ReceiverHighWater struct {
	Sequence int64
	Counters []OriginCounter // ordered by origin when read
}

// fields returns p's numbers in column order.
func (p ReceiverRetention) fields() []int {
	return []int{p.KeepLast, p.KeepHourly, p.KeepDaily, p.KeepWeekly, p.KeepMonthly, p.KeepYearly, p.KeepDeletedDays}
}

// ReceiverRetention returns the folder's retention policy, the zero
// policy when none was set.
func (db *DB) ReceiverRetention(ctx context.Context, folderID string) (ReceiverRetention, error) {
	var p ReceiverRetention
	err := db.sql.QueryRowContext(ctx, `SELECT keep_last, keep_hourly, keep_daily, keep_weekly,
		keep_monthly, keep_yearly, keep_deleted_days FROM receiver_retention WHERE folder_id = ?`, folderID).
		Scan(&p.KeepLast, &p.KeepHourly, &p.KeepDaily, &p.KeepWeekly, &p.KeepMonthly, &p.KeepYearly, &p.KeepDeletedDays)
	if errors.Is(err, sql.ErrNoRows) {
		return ReceiverRetention{}, nil
	}
	if err != nil {
		return ReceiverRetention{}, fmt.Errorf("reading retention of folder %q: %w", folderID, err)
	}
	return p, nil
}

// SetReceiverRetention stores the folder's retention policy. A negative
// number, or an unknown folder, fails with ErrConstraint.
func (db *DB) SetReceiverRetention(ctx context.Context, folderID string, p ReceiverRetention) error {
	for _, n := range p.fields() {
		if n < 0 {
			return fmt.Errorf("setting retention of folder %q: %w: negative number %d", folderID, ErrConstraint, n)
		}
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO receiver_retention (folder_id, keep_last,
			keep_hourly, keep_daily, keep_weekly, keep_monthly, keep_yearly, keep_deleted_days)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, folderID, p.KeepLast, p.KeepHourly, p.KeepDaily,
			p.KeepWeekly, p.KeepMonthly, p.KeepYearly, p.KeepDeletedDays)
		return err
	})
	if err != nil {
		return fmt.Errorf("setting retention of folder %q: %w", folderID, err)
	}
	return nil
}

// ReceiverHighWater returns the folder's stored marks (raised only by
// PruneSealed and RaiseReceiverHighWater; they do not include the
// records').
func (db *DB) ReceiverHighWater(ctx context.Context, folderID string) (ReceiverHighWater, error) {
	var hw ReceiverHighWater
	err := db.sql.QueryRowContext(ctx, "SELECT coalesce(max(high_seq), 0) FROM receiver_logs WHERE folder_id = ?",
		folderID).Scan(&hw.Sequence)
	if err != nil {
		return hw, fmt.Errorf("reading high-water marks of folder %q: %w", folderID, err)
	}
	rows, err := db.sql.QueryContext(ctx,
		"SELECT origin, counter FROM receiver_high_water WHERE folder_id = ? ORDER BY origin", folderID)
	if err != nil {
		return hw, fmt.Errorf("reading high-water marks of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			c       OriginCounter
			counter int64
		)
		if err := rows.Scan(&c.Origin, &counter); err != nil {
			return hw, fmt.Errorf("reading high-water marks of folder %q: %w", folderID, err)
		}
		c.Counter = uint64(counter)
		hw.Counters = append(hw.Counters, c)
	}
	if err := rows.Err(); err != nil {
		return hw, fmt.Errorf("reading high-water marks of folder %q: %w", folderID, err)
	}
	return hw, nil
}

// RaiseReceiverHighWater raises the folder's marks to hw where hw is
// higher; none is ever lowered. The folder must have a log
// (InitReceiverLog); an origin not of 32 bytes, a counter above
// math.MaxInt64, a negative sequence or a folder without a log fails with
// ErrConstraint and changes nothing.
func (db *DB) RaiseReceiverHighWater(ctx context.Context, folderID string, hw ReceiverHighWater) error {
	if err := hw.check(); err != nil {
		return fmt.Errorf("raising high-water marks of folder %q: %w: %v", folderID, ErrConstraint, err)
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error { return raiseHighWater(ctx, tx, folderID, hw) })
	if err != nil {
		return fmt.Errorf("raising high-water marks of folder %q: %w", folderID, err)
	}
	return nil
}

// check returns why hw cannot be stored, or nil.
func (hw *ReceiverHighWater) check() error {
	if hw.Sequence < 0 {
		return fmt.Errorf("sequence %d", hw.Sequence)
	}
	for _, c := range hw.Counters {
		if len(c.Origin) != SealedIDSize || c.Counter > math.MaxInt64 {
			return fmt.Errorf("origin of %d bytes with counter %d", len(c.Origin), c.Counter)
		}
	}
	return nil
}

// raiseHighWater raises the marks within tx.
func raiseHighWater(ctx context.Context, tx *sql.Tx, folderID string, hw ReceiverHighWater) error {
	res, err := tx.ExecContext(ctx, "UPDATE receiver_logs SET high_seq = max(high_seq, ?) WHERE folder_id = ?",
		hw.Sequence, folderID)
	if err := mustAffect(res, err); errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: folder has no log", ErrConstraint)
	} else if err != nil {
		return err
	}
	for _, c := range hw.Counters {
		if _, err := tx.ExecContext(ctx, `INSERT INTO receiver_high_water (folder_id, origin, counter)
			VALUES (?, ?, ?) ON CONFLICT (folder_id, origin) DO UPDATE
			SET counter = max(counter, excluded.counter)`, folderID, c.Origin, int64(c.Counter)); err != nil {
			return err
		}
	}
	return nil
}

// ReceiverLastSequence returns the folder's log sequence: the highest of
// its records' and its high-water mark, 0 for an empty, never pruned log.
// The next append continues after it.
func (db *DB) ReceiverLastSequence(ctx context.Context, folderID string) (int64, error) {
	var seq int64
	err := db.sql.QueryRowContext(ctx, `SELECT max(
		(SELECT coalesce(max(seq), 0) FROM receiver_records WHERE folder_id = ?1),
		(SELECT coalesce(max(high_seq), 0) FROM receiver_logs WHERE folder_id = ?1))`, folderID).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("reading log sequence of folder %q: %w", folderID, err)
	}
	return seq, nil
}

// SealedVersions calls fn for every record of the folder, without its
// Sealed payload, grouped by file key and within a file newest first (by
// stored time, then by log sequence), until fn returns an error, which
// SealedVersions returns.
func (db *DB) SealedVersions(ctx context.Context, folderID string, fn func(SealedRecord) error) error {
	rows, err := db.sql.QueryContext(ctx, `SELECT seq, origin, counter, file_key, chunks, stored_at, deleted
		FROM receiver_records WHERE folder_id = ? ORDER BY file_key, stored_at DESC, seq DESC`, folderID)
	if err != nil {
		return fmt.Errorf("listing versions of folder %q: %w", folderID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r                        SealedRecord
			counter, stored, deleted int64
		)
		if err := rows.Scan(&r.Seq, &r.Origin, &counter, &r.FileKey, &r.Chunks, &stored, &deleted); err != nil {
			return fmt.Errorf("listing versions of folder %q: %w", folderID, err)
		}
		r.Counter, r.StoredAt, r.Deleted = uint64(counter), fromNanos(stored), deleted != 0
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listing versions of folder %q: %w", folderID, err)
	}
	return nil
}

// PruneSealed deletes the folder's records with the log sequences seqs in
// one transaction that first raises the high-water marks to the highest
// log sequence and per-origin counters held before the deletion, and to
// hw. Sequences not held are ignored. Chunks are left alone
// (DeleteSealedChunks). It fails with ErrConstraint, changing nothing,
// when hw is invalid or the folder has no log.
func (db *DB) PruneSealed(ctx context.Context, folderID string, seqs []int64, hw ReceiverHighWater) error {
	if err := hw.check(); err != nil {
		return fmt.Errorf("pruning folder %q: %w: %v", folderID, ErrConstraint, err)
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := raiseHighWater(ctx, tx, folderID, hw); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE receiver_logs SET high_seq = max(high_seq,
			(SELECT coalesce(max(seq), 0) FROM receiver_records WHERE folder_id = ?1)) WHERE folder_id = ?1`,
			folderID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO receiver_high_water (folder_id, origin, counter)
			SELECT folder_id, origin, max(counter) FROM receiver_records WHERE folder_id = ? GROUP BY origin
			ON CONFLICT (folder_id, origin) DO UPDATE SET counter = max(counter, excluded.counter)`,
			folderID); err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, "DELETE FROM receiver_records WHERE folder_id = ? AND seq = ?")
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, s := range seqs {
			if _, err := stmt.ExecContext(ctx, folderID, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pruning folder %q: %w", folderID, err)
	}
	return nil
}

// DeleteSealedChunks removes the folder's chunk rows ids (IDs not held are
// ignored) in one transaction. The caller makes sure no record references
// them: the database does not check it.
func (db *DB) DeleteSealedChunks(ctx context.Context, folderID string, ids [][]byte) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, "DELETE FROM receiver_chunks WHERE folder_id = ? AND id = ?")
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, id := range ids {
			if _, err := stmt.ExecContext(ctx, folderID, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting chunks of folder %q: %w", folderID, err)
	}
	return nil
}

// SealedRecordsOfFile returns the folder's records with the file key, or
// of every file when fileKey is empty, payload included, in log order.
func (db *DB) SealedRecordsOfFile(ctx context.Context, folderID string, fileKey []byte) ([]SealedRecord, error) {
	q, args := sealedRecordColumns+` WHERE folder_id = ?`, []any{folderID}
	if len(fileKey) > 0 {
		q += ` AND file_key = ?`
		args = append(args, fileKey)
	}
	recs, err := db.sealedRecords(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading records of folder %q: %w", folderID, err)
	}
	return recs, nil
}
