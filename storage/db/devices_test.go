package db

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestDeviceRoundTrip(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	d := Device{
		ID:        "AAAAAAA-BBBBBBB",
		Name:      "laptop",
		Addresses: []string{"tcp://127.0.0.1:22100", "dynamic"},
		Untrusted: true,
		AddedAt:   at(0),
		LastSeen:  at(5),
	}
	if err := db.PutDevice(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, err := db.Device(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := d
	want.AddedAt, want.LastSeen = d.AddedAt.UTC(), d.LastSeen.UTC()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Device = %+v\nwant     %+v", got, want)
	}
}

func TestPutDeviceDefaultsAndUpdate(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	before := time.Now()
	if err := db.PutDevice(ctx, Device{ID: "D"}); err != nil {
		t.Fatal(err)
	}
	d, err := db.Device(ctx, "D")
	if err != nil {
		t.Fatal(err)
	}
	if d.AddedAt.Before(before.Add(-time.Second)) || d.AddedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("AddedAt %v is not about now", d.AddedAt)
	}
	if !d.LastSeen.IsZero() || d.Addresses == nil || len(d.Addresses) != 0 || d.Untrusted {
		t.Errorf("new device = %+v, want never seen, no addresses (non-nil), trusted", d)
	}

	// An update with zero times keeps both.
	if err := db.TouchDevice(ctx, "D", at(1)); err != nil {
		t.Fatal(err)
	}
	if err := db.PutDevice(ctx, Device{ID: "D", Name: "renamed", Addresses: []string{"tcp://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	u, err := db.Device(ctx, "D")
	if err != nil {
		t.Fatal(err)
	}
	if !u.AddedAt.Equal(d.AddedAt) || !u.LastSeen.Equal(at(1)) || u.Name != "renamed" ||
		!reflect.DeepEqual(u.Addresses, []string{"tcp://127.0.0.1:1"}) {
		t.Errorf("updated device = %+v", u)
	}

	// An update with explicit times sets them.
	if err := db.PutDevice(ctx, Device{ID: "D", AddedAt: at(-10), LastSeen: at(-5)}); err != nil {
		t.Fatal(err)
	}
	u, _ = db.Device(ctx, "D")
	if !u.AddedAt.Equal(at(-10)) || !u.LastSeen.Equal(at(-5)) {
		t.Errorf("explicit times: %+v", u)
	}
}

func TestDevicesOrderedAndEmpty(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	ds, err := db.Devices(ctx)
	if err != nil || len(ds) != 0 {
		t.Fatalf("Devices on empty db = %v, %v", ds, err)
	}
	for _, id := range []string{"C", "A", "B"} {
		if err := db.PutDevice(ctx, Device{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err = db.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	if !reflect.DeepEqual(ids, []string{"A", "B", "C"}) {
		t.Fatalf("Devices IDs = %v", ids)
	}
}

func TestDeviceNotFound(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	if _, err := db.Device(ctx, "X"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Device: %v", err)
	}
	if err := db.RemoveDevice(ctx, "X"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveDevice: %v", err)
	}
	if err := db.TouchDevice(ctx, "X", at(0)); !errors.Is(err, ErrNotFound) {
		t.Errorf("TouchDevice: %v", err)
	}
	if err := db.PutDevice(ctx, Device{}); !errors.Is(err, ErrConstraint) {
		t.Errorf("PutDevice with empty ID: %v, want ErrConstraint", err)
	}
}

func TestTouchDeviceNeverGoesBack(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	if err := db.PutDevice(ctx, Device{ID: "D"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		touch, want time.Time
	}{
		{at(10), at(10)},
		{at(9), at(10)}, // n-1: ignored
		{at(10), at(10)},
		{at(11), at(11)}, // n+1: moves
	} {
		if err := db.TouchDevice(ctx, "D", c.touch); err != nil {
			t.Fatal(err)
		}
		d, _ := db.Device(ctx, "D")
		if !d.LastSeen.Equal(c.want) {
			t.Errorf("after touch at %v: LastSeen %v, want %v", c.touch, d.LastSeen, c.want)
		}
	}
}

func TestRemoveDeviceCascades(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutDevice(ctx, Device{ID: "D"}))
	must(t, db.PutDevice(ctx, Device{ID: "E"}))
	must(t, db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}))
	must(t, db.ShareFolder(ctx, "f", "D"))
	must(t, db.ShareFolder(ctx, "f", "E"))
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "D", FolderID: "g"}))
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "E", FolderID: "g"}))

	must(t, db.RemoveDevice(ctx, "D"))
	if ids, err := db.FolderDevices(ctx, "f"); err != nil || !reflect.DeepEqual(ids, []string{"E"}) {
		t.Errorf("FolderDevices after removing D = %v, %v", ids, err)
	}
	ps, err := db.PendingFolders(ctx)
	if err != nil || len(ps) != 1 || ps[0].DeviceID != "E" {
		t.Errorf("PendingFolders after removing D = %v, %v", ps, err)
	}
	if _, err := db.Folder(ctx, "f"); err != nil {
		t.Errorf("the folder went with the device: %v", err)
	}
}

func TestPendingDevices(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	ps, err := db.PendingDevices(ctx)
	if err != nil || len(ps) != 0 {
		t.Fatalf("PendingDevices on empty db = %v, %v", ps, err)
	}
	must(t, db.AddPendingDevice(ctx, PendingDevice{ID: "P", Name: "a", Address: "127.0.0.1:1", FirstSeen: at(0), LastSeen: at(0)}))
	must(t, db.AddPendingDevice(ctx, PendingDevice{ID: "O", FirstSeen: at(3), LastSeen: at(3)}))
	// A second attempt keeps first_seen and takes the new details.
	must(t, db.AddPendingDevice(ctx, PendingDevice{ID: "P", Name: "b", Address: "127.0.0.1:2", FirstSeen: at(7), LastSeen: at(7)}))
	// A late report of an older attempt does not move last_seen back.
	must(t, db.AddPendingDevice(ctx, PendingDevice{ID: "P", Name: "b", Address: "127.0.0.1:2", LastSeen: at(6)}))

	ps, err = db.PendingDevices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []PendingDevice{
		{ID: "O", FirstSeen: at(3).UTC(), LastSeen: at(3).UTC()},
		{ID: "P", Name: "b", Address: "127.0.0.1:2", FirstSeen: at(0).UTC(), LastSeen: at(7).UTC()},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Fatalf("PendingDevices = %+v\nwant %+v", ps, want)
	}

	// Zero times mean now.
	must(t, db.AddPendingDevice(ctx, PendingDevice{ID: "N"}))
	ps, _ = db.PendingDevices(ctx)
	if n := ps[0]; n.ID != "N" || time.Since(n.FirstSeen) > time.Minute || !n.FirstSeen.Equal(n.LastSeen) {
		t.Errorf("pending device with zero times = %+v", n)
	}

	must(t, db.RemovePendingDevice(ctx, "O"))
	if err := db.RemovePendingDevice(ctx, "O"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second RemovePendingDevice: %v, want ErrNotFound", err)
	}
	if err := db.AddPendingDevice(ctx, PendingDevice{}); !errors.Is(err, ErrConstraint) {
		t.Errorf("AddPendingDevice with empty ID: %v, want ErrConstraint", err)
	}

	// Accepting a device clears its pending entry.
	must(t, db.PutDevice(ctx, Device{ID: "P"}))
	ps, _ = db.PendingDevices(ctx)
	if len(ps) != 1 || ps[0].ID != "N" {
		t.Errorf("PendingDevices after accepting P = %+v", ps)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPendingFolderEncryptedFlag(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutDevice(ctx, Device{ID: "D"}))
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "D", FolderID: "g", Encrypted: true}))
	ps, err := db.PendingFolders(ctx)
	if err != nil || len(ps) != 1 || !ps[0].Encrypted {
		t.Fatalf("PendingFolders = %+v, %v; want one encrypted offer", ps, err)
	}
	// A later offer of the same folder as a plain share updates the flag.
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "D", FolderID: "g"}))
	if ps, _ := db.PendingFolders(ctx); len(ps) != 1 || ps[0].Encrypted {
		t.Fatalf("after a plain offer: %+v", ps)
	}
}
