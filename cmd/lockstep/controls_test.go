package main

import (
	"context"
	"path/filepath"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// TestRegistryPausedDevice: a paused device is left out of the devices the
// connection service dials and lets in, and its calls do not make it
// pending; an unknown device's still do.
func TestRegistryPausedDevice(t *testing.T) {
	ctx := context.Background()
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	paused, active, unknown := crypt.DeviceID{1}, crypt.DeviceID{2}, crypt.DeviceID{3}
	for _, id := range []crypt.DeviceID{paused, active} {
		if err := d.PutDevice(ctx, db.Device{ID: id.String()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SetDevicePaused(ctx, paused.String(), true); err != nil {
		t.Fatal(err)
	}
	r := &registry{db: d}
	peers, err := r.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 1 || peers[0].ID != active {
		t.Errorf("Peers = %+v, want only the active device", peers)
	}
	if err := r.Pending(ctx, paused, "p", "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Pending(ctx, unknown, "laptop-b\x1b[2J", "127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	pend, err := d.PendingDevices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) != 1 || pend[0].ID != unknown.String() || pend[0].Name != "laptop-b[2J" {
		t.Errorf("pending = %+v, want only the unknown device, named as its certificate says without control characters", pend)
	}
}
