package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Device is a device this node has been told about: a trusted peer or an
// untrusted receiver.
type Device struct {
	// ID is the canonical device ID string; this package stores it as given.
	ID   string
	Name string
	// Addresses are where to reach the device (e.g. "tcp://HOST:PORT" or
	// "dynamic"). Never nil when read back.
	Addresses []string
	// Untrusted marks a receiver: it gets only encrypted data. It
	// changes only through SetDeviceTrust.
	Untrusted bool
	AddedAt   time.Time
	// LastSeen is when the device was last connected; zero if never.
	LastSeen time.Time
	// WasUntrusted (read only) says this node has held the device as
	// untrusted at some time, under this entry or an earlier one that
	// was removed: it gets plaintext only after a confirmed
	// SetDeviceTrust. Set whenever Untrusted is.
	WasUntrusted bool
	// TrustChangedAt (read only) is when SetDeviceTrust last changed
	// Untrusted; zero if it never did.
	TrustChangedAt time.Time
	// Paused (read only; SetDevicePaused changes it): the device is
	// neither dialled nor let in.
	Paused bool
}

// Errors of a device's trust.
var (
	// ErrTrustChange: PutDevice was asked to change a known device's
	// trust, which takes SetDeviceTrust.
	ErrTrustChange = errors.New("a known device's trust changes only by an explicit step")
	// ErrWasUntrusted: the device was untrusted on this node once, so it
	// becomes trusted (and gets plaintext) only by a confirmed
	// SetDeviceTrust.
	ErrWasUntrusted = errors.New("the device was untrusted here: making it trusted needs confirmation")
)

// MaxPendingDevices bounds the pending devices kept: any key can try to
// connect, and each one that does is recorded, so beyond it the device seen
// longest ago makes way. A person reviews the list; a hundred is more than
// anyone adds at once.
const MaxPendingDevices = 100

// PendingDevice is an unknown device that tried to connect.
type PendingDevice struct {
	ID      string
	Name    string
	Address string
	// FirstSeen and LastSeen bound the attempts to connect.
	FirstSeen time.Time
	LastSeen  time.Time
}

// PutDevice inserts d or updates the device with its ID. A zero AddedAt
// means now for a new device and "unchanged" for an existing one; a zero
// LastSeen leaves last_seen unchanged (never, for a new device). A pending
// entry for the same ID is removed in the same transaction: adding a device
// accepts it.
//
// PutDevice never changes a device's trust: d.Untrusted must be what the
// known device has (else ErrTrustChange; SetDeviceTrust changes it), and
// a new device that was untrusted here before is added trusted only by
// SetDeviceTrust (else ErrWasUntrusted). WasUntrusted and TrustChangedAt
// are ignored.
func (db *DB) PutDevice(ctx context.Context, d Device) error {
	if d.ID == "" {
		return fmt.Errorf("putting device: %w: empty device ID", ErrConstraint)
	}
	addrs := d.Addresses
	if addrs == nil {
		addrs = []string{}
	}
	addrJSON, err := json.Marshal(addrs)
	if err != nil {
		return fmt.Errorf("putting device %q: encoding addresses: %w", d.ID, err)
	}
	added := nanos(d.AddedAt)
	if added == 0 {
		added = nanos(time.Now())
	}
	err = db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var untrusted, was bool
		err := tx.QueryRowContext(ctx, "SELECT untrusted FROM devices WHERE id = ?", d.ID).Scan(&untrusted)
		switch {
		case err == nil && untrusted != d.Untrusted:
			return ErrTrustChange
		case errors.Is(err, sql.ErrNoRows) && !d.Untrusted:
			if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM untrusted_history WHERE device_id = ?)", d.ID).Scan(&was); err != nil {
				return err
			}
			if was {
				return ErrWasUntrusted
			}
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO devices (id, name, addresses, untrusted, added_at, last_seen)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET
				name = excluded.name,
				addresses = excluded.addresses,
				added_at = CASE WHEN ? THEN excluded.added_at ELSE devices.added_at END,
				last_seen = CASE WHEN excluded.last_seen <> 0 THEN excluded.last_seen ELSE devices.last_seen END`,
			d.ID, d.Name, string(addrJSON), boolInt(d.Untrusted), added, nanos(d.LastSeen),
			!d.AddedAt.IsZero())
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM pending_devices WHERE id = ?", d.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("putting device %q: %w", d.ID, err)
	}
	return nil
}

// SetDeviceTrust makes the known device untrusted (a receiver: it gets
// only encrypted data) or trusted (it gets plaintext). A device this node
// has ever held as untrusted becomes trusted only when confirmed, else
// ErrWasUntrusted; setting the trust it has already changes nothing. An
// unknown device is ErrNotFound.
func (db *DB) SetDeviceTrust(ctx context.Context, id string, untrusted, confirmed bool) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var cur, was bool
		err := tx.QueryRowContext(ctx, `SELECT untrusted, EXISTS (SELECT 1 FROM untrusted_history WHERE device_id = devices.id)
			FROM devices WHERE id = ?`, id).Scan(&cur, &was)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil || cur == untrusted {
			return err
		}
		if !untrusted && was && !confirmed {
			return ErrWasUntrusted
		}
		_, err = tx.ExecContext(ctx, "UPDATE devices SET untrusted = ?, trust_changed_at = ? WHERE id = ?",
			boolInt(untrusted), nanos(time.Now()), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("setting the trust of device %q: %w", id, err)
	}
	return nil
}

const deviceColumns = "id, name, addresses, untrusted, added_at, last_seen, trust_changed_at, paused, " +
	"EXISTS (SELECT 1 FROM untrusted_history h WHERE h.device_id = devices.id)"

// scanDevice reads one row of deviceColumns.
func scanDevice(row interface{ Scan(...any) error }) (Device, error) {
	var (
		d                    Device
		addrs                string
		added, seen, changed int64
		untrustedFlag        int
	)
	if err := row.Scan(&d.ID, &d.Name, &addrs, &untrustedFlag, &added, &seen, &changed, &d.Paused, &d.WasUntrusted); err != nil {
		return Device{}, err
	}
	if err := json.Unmarshal([]byte(addrs), &d.Addresses); err != nil {
		return Device{}, fmt.Errorf("device %q: decoding addresses: %w", d.ID, err)
	}
	if d.Addresses == nil {
		d.Addresses = []string{}
	}
	d.Untrusted = untrustedFlag != 0
	d.AddedAt, d.LastSeen, d.TrustChangedAt = fromNanos(added), fromNanos(seen), fromNanos(changed)
	return d, nil
}

// Device returns the device with the given ID, or ErrNotFound.
func (db *DB) Device(ctx context.Context, id string) (Device, error) {
	row := db.sql.QueryRowContext(ctx, "SELECT "+deviceColumns+" FROM devices WHERE id = ?", id)
	d, err := scanDevice(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Device{}, fmt.Errorf("device %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Device{}, fmt.Errorf("reading device %q: %w", id, err)
	}
	return d, nil
}

// Devices returns every device, ordered by ID.
func (db *DB) Devices(ctx context.Context) ([]Device, error) {
	rows, err := db.sql.QueryContext(ctx, "SELECT "+deviceColumns+" FROM devices ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("listing devices: %w", err)
	}
	defer rows.Close()
	var out []Device
	for rows.Next() {
		d, err := scanDevice(rows)
		if err != nil {
			return nil, fmt.Errorf("listing devices: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing devices: %w", err)
	}
	return out, nil
}

// RemoveDevice deletes the device, its folder shares and the folders it
// offered, or returns ErrNotFound. That it was ever untrusted stays known.
func (db *DB) RemoveDevice(ctx context.Context, id string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx, "DELETE FROM devices WHERE id = ?", id))
	})
	if err != nil {
		return fmt.Errorf("removing device %q: %w", id, err)
	}
	return nil
}

// TouchDevice records that the device was seen at t. last_seen never moves
// backwards, so racing callers cannot undo each other. It returns
// ErrNotFound for an unknown device.
func (db *DB) TouchDevice(ctx context.Context, id string, t time.Time) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx,
			"UPDATE devices SET last_seen = max(last_seen, ?) WHERE id = ?", nanos(t), id))
	})
	if err != nil {
		return fmt.Errorf("touching device %q: %w", id, err)
	}
	return nil
}

// AddPendingDevice records a connection attempt by an unknown device. For a
// device already pending it keeps first_seen and updates name, address and
// last_seen. Zero FirstSeen or LastSeen mean now. At most MaxPendingDevices
// are kept: those seen longest ago (by last_seen, then ID) go, in the same
// transaction, which may be p itself when it is older than all the rest.
func (db *DB) AddPendingDevice(ctx context.Context, p PendingDevice) error {
	if p.ID == "" {
		return fmt.Errorf("adding pending device: %w: empty device ID", ErrConstraint)
	}
	now := time.Now()
	first, last := p.FirstSeen, p.LastSeen
	if first.IsZero() {
		first = now
	}
	if last.IsZero() {
		last = now
	}
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO pending_devices (id, name, address, first_seen, last_seen)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET
				name = excluded.name,
				address = excluded.address,
				last_seen = max(pending_devices.last_seen, excluded.last_seen)`,
			p.ID, p.Name, p.Address, nanos(first), nanos(last))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			DELETE FROM pending_devices WHERE id IN (
				SELECT id FROM pending_devices ORDER BY last_seen DESC, id DESC LIMIT -1 OFFSET ?)`,
			MaxPendingDevices)
		return err
	})
	if err != nil {
		return fmt.Errorf("adding pending device %q: %w", p.ID, err)
	}
	return nil
}

// PendingDevices returns every pending device, ordered by ID.
func (db *DB) PendingDevices(ctx context.Context) ([]PendingDevice, error) {
	rows, err := db.sql.QueryContext(ctx,
		"SELECT id, name, address, first_seen, last_seen FROM pending_devices ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("listing pending devices: %w", err)
	}
	defer rows.Close()
	var out []PendingDevice
	for rows.Next() {
		var p PendingDevice
		var first, last int64
		if err := rows.Scan(&p.ID, &p.Name, &p.Address, &first, &last); err != nil {
			return nil, fmt.Errorf("listing pending devices: %w", err)
		}
		p.FirstSeen, p.LastSeen = fromNanos(first), fromNanos(last)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing pending devices: %w", err)
	}
	return out, nil
}

// RemovePendingDevice forgets a pending device, or returns ErrNotFound.
func (db *DB) RemovePendingDevice(ctx context.Context, id string) error {
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return mustAffect(tx.ExecContext(ctx, "DELETE FROM pending_devices WHERE id = ?", id))
	})
	if err != nil {
		return fmt.Errorf("removing pending device %q: %w", id, err)
	}
	return nil
}
