package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// CheckSchedule says how often the daemon checks a folder's backups.
type CheckSchedule struct {
	Folder   string
	Every    time.Duration // > 0, whole seconds
	ReadData string        // "", "all", "N%" or a size
}

// SetCheckSchedule sets the folder's schedule, or removes it when Every
// is 0. An unknown folder is ErrNotFound.
func (db *DB) SetCheckSchedule(ctx context.Context, s CheckSchedule) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, "SELECT 1 FROM folders WHERE id = ?", s.Folder).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		} else if err != nil {
			return err
		}
		if s.Every <= 0 {
			_, err := tx.ExecContext(ctx, "DELETE FROM folder_checks WHERE folder_id = ?", s.Folder)
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO folder_checks (folder_id, every_seconds, read_data) VALUES (?, ?, ?)
			ON CONFLICT (folder_id) DO UPDATE SET every_seconds = excluded.every_seconds, read_data = excluded.read_data`,
			s.Folder, max(int64(s.Every/time.Second), 1), s.ReadData)
		return err
	})
	if err != nil {
		return fmt.Errorf("setting the check schedule of folder %q: %w", s.Folder, err)
	}
	return nil
}

// CheckSchedules returns every folder's schedule, by folder ID.
func (db *DB) CheckSchedules(ctx context.Context) ([]CheckSchedule, error) {
	rows, err := db.sql.QueryContext(ctx, "SELECT folder_id, every_seconds, read_data FROM folder_checks ORDER BY folder_id")
	if err != nil {
		return nil, fmt.Errorf("reading check schedules: %w", err)
	}
	defer rows.Close()
	var out []CheckSchedule
	for rows.Next() {
		var s CheckSchedule
		var secs int64
		if err := rows.Scan(&s.Folder, &secs, &s.ReadData); err != nil {
			return nil, fmt.Errorf("reading check schedules: %w", err)
		}
		s.Every = time.Duration(secs) * time.Second
		out = append(out, s)
	}
	return out, rows.Err()
}

// CheckResult is the last check of a folder.
type CheckResult struct {
	Folder    string
	Finished  time.Time
	Clean     bool
	LastClean time.Time // when a check was last clean; zero if never
	Reports   []byte    // JSON
}

// PutCheckResult records the folder's latest check; LastClean is kept
// from the one before unless this one is clean (then it is Finished).
func (db *DB) PutCheckResult(ctx context.Context, r CheckResult) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		lastClean := int64(0)
		if r.Clean {
			lastClean = nanos(r.Finished)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO check_results (folder_id, finished_at, clean, last_clean_at, reports) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (folder_id) DO UPDATE SET finished_at = excluded.finished_at, clean = excluded.clean,
				last_clean_at = CASE WHEN excluded.clean = 1 THEN excluded.last_clean_at ELSE check_results.last_clean_at END,
				reports = excluded.reports`,
			r.Folder, nanos(r.Finished), boolInt(r.Clean), lastClean, r.Reports)
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the check of folder %q: %w", r.Folder, err)
	}
	return nil
}

// LastCheck returns the folder's latest check, or ErrNotFound.
func (db *DB) LastCheck(ctx context.Context, folderID string) (CheckResult, error) {
	r := CheckResult{Folder: folderID}
	var finished, lastClean int64
	var clean int
	err := db.sql.QueryRowContext(ctx, "SELECT finished_at, clean, last_clean_at, reports FROM check_results WHERE folder_id = ?", folderID).
		Scan(&finished, &clean, &lastClean, &r.Reports)
	if errors.Is(err, sql.ErrNoRows) {
		return CheckResult{}, fmt.Errorf("last check of folder %q: %w", folderID, ErrNotFound)
	}
	if err != nil {
		return CheckResult{}, fmt.Errorf("last check of folder %q: %w", folderID, err)
	}
	r.Finished, r.Clean, r.LastClean = fromNanos(finished), clean == 1, fromNanos(lastClean)
	return r, nil
}
