package main

import (
	"context"
	"errors"
	"time"

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

func (r *registry) Pending(ctx context.Context, id crypt.DeviceID, addr string) error {
	if _, err := r.db.Device(ctx, id.String()); err == nil {
		// A paused device, refused: it is known, not pending.
		return nil
	} else if !errors.Is(err, db.ErrNotFound) {
		return err
	}
	now := time.Now()
	if err := r.db.AddPendingDevice(ctx, db.PendingDevice{ID: id.String(), Address: addr, FirstSeen: now, LastSeen: now}); err != nil {
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
