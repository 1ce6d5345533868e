package main

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/connections"
	"lockstep/sync/events"
)

// registry answers the connection service's questions from the database.
type registry struct {
	db     *db.DB
	self   crypt.DeviceID
	events *events.Bus
}

func (r *registry) Peers(ctx context.Context) ([]connections.Peer, error) {
	devs, err := r.db.Devices(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]connections.Peer, 0, len(devs))
	for _, d := range devs {
		id, err := crypt.ParseDeviceID(d.ID)
		if err != nil {
			// Only valid IDs are ever stored; a bad row must not stop the rest.
			continue
		}
		if d.Paused {
			// Neither dialled nor let in; left out, its connection is
			// dropped at the next reload.
			continue
		}
		out = append(out, connections.Peer{ID: id, Addresses: d.Addresses})
	}
	return out, nil
}

func (r *registry) Pending(ctx context.Context, id crypt.DeviceID, name, addr string) error {
	if _, err := r.db.Device(ctx, id.String()); err == nil {
		// A paused device, refused: it is known, not pending.
		return nil
	} else if !errors.Is(err, db.ErrNotFound) {
		return err
	}
	now := time.Now()
	p := db.PendingDevice{ID: id.String(), Name: announcedName(name), Address: addr, FirstSeen: now, LastSeen: now}
	if err := r.db.AddPendingDevice(ctx, p); err != nil {
		return err
	}
	r.events.Publish(events.PendingChanged{Device: id.String()})
	return nil
}

func (r *registry) Seen(ctx context.Context, id crypt.DeviceID, t time.Time) error {
	err := r.db.TouchDevice(ctx, id.String(), t)
	if errors.Is(err, db.ErrNotFound) {
		// Removed while connected: nothing to record.
		return nil
	}
	return err
}

// maxAnnouncedName bounds the name kept of a pending device.
const maxAnnouncedName = 64

// announcedName makes the name a device's certificate gives it fit to
// show: valid UTF-8, no control or format characters, at most maxAnnouncedName
// bytes (cut at a character). It comes from whoever connected.
func announcedName(name string) string {
	name = strings.Map(func(r rune) rune {
		// Format characters too: a right-to-left override would show the
		// name reversed, and the rest of a line with it.
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, strings.ToValidUTF8(name, ""))
	for len(name) > maxAnnouncedName {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return strings.TrimSpace(name)
}
