package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// A trusted device's view of each receiver's log of each folder: how far
// it has read the log, what of its own records the receiver served back,
// and per origin device what the log holds. The view dies with its folder
// and with the receiver's device; writing one for an unknown folder or
// device fails with ErrConstraint. (The receiver_* tables of 0003 on are a
// receiver's own holdings; these views are kept by the devices that send
// to it.)

// ReceiverView is what this device knows of a receiver's log of a folder.
// Every field is >= 0, and 0 when unknown.
type ReceiverView struct {
	// Cursor is the highest log sequence read.
	Cursor int64
	// Held is the highest counter of this device's own records that the
	// receiver served back: it has them, for certain.
	Held int64
	// HeldAt is the log sequence at which it served the record of Held.
	HeldAt int64
}

// ReceiverView returns this device's view of the receiver's log of the
// folder; the zero view when it has none.
func (db *DB) ReceiverView(ctx context.Context, folderID, deviceID string) (ReceiverView, error) {
	var v ReceiverView
	err := db.sql.QueryRowContext(ctx, "SELECT cursor, held, held_at FROM receiver_views WHERE folder_id = ? AND device_id = ?",
		folderID, deviceID).Scan(&v.Cursor, &v.Held, &v.HeldAt)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return ReceiverView{}, fmt.Errorf("reading view of receiver %q of folder %q: %w", deviceID, folderID, err)
	}
	return v, nil
}

// SetReceiverCursor stores the highest sequence read of the receiver's
// log of the folder, as given: it may lower it. A negative cursor fails
// with ErrConstraint.
func (db *DB) SetReceiverCursor(ctx context.Context, folderID, deviceID string, cursor int64) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO receiver_views (folder_id, device_id, cursor) VALUES (?, ?, ?)
			ON CONFLICT (folder_id, device_id) DO UPDATE SET cursor = excluded.cursor`,
			folderID, deviceID, cursor)
		return err
	})
	if err != nil {
		return fmt.Errorf("setting cursor of receiver %q of folder %q: %w", deviceID, folderID, err)
	}
	return nil
}

// SetReceiverHeld stores, together, the highest counter of this device's
// own records that the receiver served back in its log of the folder and
// the log sequence it served it at, as given. A negative number fails
// with ErrConstraint.
func (db *DB) SetReceiverHeld(ctx context.Context, folderID, deviceID string, held, at int64) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO receiver_views (folder_id, device_id, held, held_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (folder_id, device_id) DO UPDATE SET held = excluded.held, held_at = excluded.held_at`,
			folderID, deviceID, held, at)
		return err
	})
	if err != nil {
		return fmt.Errorf("setting held record of receiver %q of folder %q: %w", deviceID, folderID, err)
	}
	return nil
}

// OriginMark is what this device knows of one origin device's records in
// a receiver's log.
type OriginMark struct {
	// Seen is the highest counter read in the log.
	Seen uint64
	// Mark is the highest counter the receiver says it holds.
	Mark uint64
}

// ReceiverOrigins returns, by origin device ID as stored, what this device
// knows of each origin's records in the receiver's log of the folder. The
// map is empty, never nil, when nothing is known.
func (db *DB) ReceiverOrigins(ctx context.Context, folderID, deviceID string) (map[string]OriginMark, error) {
	rows, err := db.sql.QueryContext(ctx, "SELECT origin, seen, mark FROM receiver_view_origins WHERE folder_id = ? AND device_id = ?",
		folderID, deviceID)
	if err != nil {
		return nil, fmt.Errorf("reading origins of receiver %q of folder %q: %w", deviceID, folderID, err)
	}
	defer rows.Close()
	out := map[string]OriginMark{}
	for rows.Next() {
		var origin string
		var seen, mark int64
		if err := rows.Scan(&origin, &seen, &mark); err != nil {
			return nil, fmt.Errorf("reading origins of receiver %q of folder %q: %w", deviceID, folderID, err)
		}
		out[origin] = OriginMark{Seen: uint64(seen), Mark: uint64(mark)}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading origins of receiver %q of folder %q: %w", deviceID, folderID, err)
	}
	return out, nil
}

// RaiseReceiverOrigins raises, in one transaction, each origin's Seen and
// Mark in the receiver's log of the folder to those given where they are
// higher; it never lowers one, so a zero leaves it as it is. An empty
// origin ID, or a number above math.MaxInt64, fails with ErrConstraint
// and changes nothing.
func (db *DB) RaiseReceiverOrigins(ctx context.Context, folderID, deviceID string, marks map[string]OriginMark) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for o, m := range marks {
			// Past math.MaxInt64 the bit pattern is negative, which the
			// schema refuses.
			_, err := tx.ExecContext(ctx, `INSERT INTO receiver_view_origins (folder_id, device_id, origin, seen, mark)
				VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (folder_id, device_id, origin) DO UPDATE SET
					seen = max(seen, excluded.seen), mark = max(mark, excluded.mark)`,
				folderID, deviceID, o, int64(m.Seen), int64(m.Mark))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raising origins of receiver %q of folder %q: %w", deviceID, folderID, err)
	}
	return nil
}

// ForgetReceiverView drops everything this device knew of the receiver's
// log of the folder (its view and its origins), as when the log started
// over. The index ID the receiver announced stays (see SetPeerIndexID).
// Forgetting a view that does not exist is not an error.
func (db *DB) ForgetReceiverView(ctx context.Context, folderID, deviceID string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, table := range []string{"receiver_views", "receiver_view_origins"} {
			// table is one of the constants above, never input.
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE folder_id = ? AND device_id = ?", folderID, deviceID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("forgetting view of receiver %q of folder %q: %w", deviceID, folderID, err)
	}
	return nil
}
