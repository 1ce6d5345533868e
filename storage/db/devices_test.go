package db

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
	want.WasUntrusted = true
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

// TestDeviceTrustExplicit: PutDevice never changes a known device's
// trust; SetDeviceTrust does, and makes a device that was ever untrusted
// (even under an entry since removed) trusted only when confirmed.
func TestDeviceTrustExplicit(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutDevice(ctx, Device{ID: "R", Name: "vps", Untrusted: true}))
	must(t, db.PutDevice(ctx, Device{ID: "T", Name: "laptop"}))

	if err := db.PutDevice(ctx, Device{ID: "R", Name: "vps"}); !errors.Is(err, ErrTrustChange) {
		t.Errorf("PutDevice making a receiver trusted: %v, want ErrTrustChange", err)
	}
	if err := db.PutDevice(ctx, Device{ID: "T", Untrusted: true}); !errors.Is(err, ErrTrustChange) {
		t.Errorf("PutDevice making a peer untrusted: %v, want ErrTrustChange", err)
	}
	must(t, db.PutDevice(ctx, Device{ID: "R", Name: "vps2", Untrusted: true, Addresses: []string{"tcp://127.0.0.1:2"}}))
	r, err := db.Device(ctx, "R")
	if err != nil || !r.Untrusted || !r.WasUntrusted || r.Name != "vps2" || !r.TrustChangedAt.IsZero() {
		t.Fatalf("the receiver: %+v, %v", r, err)
	}
	if tr, _ := db.Device(ctx, "T"); tr.Untrusted || tr.WasUntrusted {
		t.Fatalf("the peer: %+v", tr)
	}

	if err := db.SetDeviceTrust(ctx, "R", false, false); !errors.Is(err, ErrWasUntrusted) {
		t.Errorf("trusting a receiver unconfirmed: %v, want ErrWasUntrusted", err)
	}
	if r, _ := db.Device(ctx, "R"); !r.Untrusted {
		t.Fatal("an unconfirmed SetDeviceTrust made the receiver trusted")
	}
	before := time.Now()
	must(t, db.SetDeviceTrust(ctx, "R", false, true))
	if r, _ := db.Device(ctx, "R"); r.Untrusted || !r.WasUntrusted || r.TrustChangedAt.Before(before.Add(-time.Second)) {
		t.Fatalf("after a confirmed SetDeviceTrust: %+v", r)
	}
	// Trusted already: nothing to confirm.
	must(t, db.SetDeviceTrust(ctx, "R", false, false))

	must(t, db.SetDeviceTrust(ctx, "T", true, false))
	if err := db.SetDeviceTrust(ctx, "T", false, false); !errors.Is(err, ErrWasUntrusted) {
		t.Errorf("trusting a peer made untrusted once: %v, want ErrWasUntrusted", err)
	}
	if tr, _ := db.Device(ctx, "T"); !tr.Untrusted || !tr.WasUntrusted || tr.TrustChangedAt.IsZero() {
		t.Fatalf("the peer made untrusted: %+v", tr)
	}
	if err := db.SetDeviceTrust(ctx, "X", true, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown device: %v, want ErrNotFound", err)
	}

	// Removed and added again, it is still known to have been untrusted.
	must(t, db.RemoveDevice(ctx, "T"))
	if err := db.PutDevice(ctx, Device{ID: "T"}); !errors.Is(err, ErrWasUntrusted) {
		t.Errorf("re-adding a removed receiver trusted: %v, want ErrWasUntrusted", err)
	}
	must(t, db.PutDevice(ctx, Device{ID: "T", Untrusted: true}))
	if tr, _ := db.Device(ctx, "T"); !tr.Untrusted || !tr.WasUntrusted {
		t.Fatalf("the receiver added again: %+v", tr)
	}
}

// TestMigrateDeviceTrust: migration 0009 records the untrusted devices of
// a schema-8 database as ever untrusted, and only those.
func TestMigrateDeviceTrust(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lockstep.db")
	old, err := openWith(ctx, path, migrationsUpTo(t, 8))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		id        string
		untrusted int
	}{{"R", 1}, {"T", 0}} {
		_, err := old.sql.ExecContext(ctx, "INSERT INTO devices (id, untrusted, added_at) VALUES (?, ?, 1)", d.id, d.untrusted)
		must(t, err)
	}
	must(t, old.Close())
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if r, err := db.Device(ctx, "R"); err != nil || !r.Untrusted || !r.WasUntrusted {
		t.Errorf("the receiver after migrating: %+v, %v", r, err)
	}
	if tr, err := db.Device(ctx, "T"); err != nil || tr.Untrusted || tr.WasUntrusted {
		t.Errorf("the peer after migrating: %+v, %v", tr, err)
	}
	if err := db.SetDeviceTrust(ctx, "R", false, false); !errors.Is(err, ErrWasUntrusted) {
		t.Errorf("trusting the migrated receiver unconfirmed: %v", err)
	}
}

// TestPendingDevicesCapped: unknown devices cost nothing to make, so at
// most MaxPendingDevices are kept: a new attempt evicts the one seen
// longest ago, and a device seen again stays.
func TestPendingDevicesCapped(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	const n = 2000
	id := func(i int) string { return fmt.Sprintf("D%04d", i) }
	for i := range n {
		must(t, db.AddPendingDevice(ctx, PendingDevice{ID: id(i), FirstSeen: at(i), LastSeen: at(i)}))
		if i == n/2 {
			// An early one tries again: seen now, it is among the newest.
			must(t, db.AddPendingDevice(ctx, PendingDevice{ID: id(0), LastSeen: at(i)}))
		}
	}
	ps, err := db.PendingDevices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != MaxPendingDevices {
		t.Fatalf("%d pending devices after %d attempts, want %d", len(ps), n, MaxPendingDevices)
	}
	for _, p := range ps {
		var i int
		fmt.Sscanf(p.ID, "D%d", &i)
		if i < n-MaxPendingDevices {
			t.Fatalf("%s kept (last seen %v), though %d seen later were offered", p.ID, p.LastSeen, n-i-1)
		}
	}
	// D0000 was seen again at n/2; since then more than the cap came.
	if ps[0].ID == id(0) {
		t.Fatalf("%s kept although %d devices were seen after it", id(0), n/2)
	}
	// A late report of an attempt older than every one kept changes nothing.
	must(t, db.AddPendingDevice(ctx, PendingDevice{ID: "late", FirstSeen: at(-1), LastSeen: at(-1)}))
	after, _ := db.PendingDevices(ctx)
	if !reflect.DeepEqual(after, ps) {
		t.Fatal("a pending device older than every one kept evicted one")
	}
	// Seen again, a kept device stays while newer ones arrive.
	oldest, next := id(n-MaxPendingDevices), id(n-MaxPendingDevices+1)
	must(t, db.AddPendingDevice(ctx, PendingDevice{ID: oldest, LastSeen: at(n)}))
	must(t, db.AddPendingDevice(ctx, PendingDevice{ID: "new", LastSeen: at(n + 1)}))
	after, _ = db.PendingDevices(ctx)
	ids := map[string]bool{}
	for _, p := range after {
		ids[p.ID] = true
	}
	if len(after) != MaxPendingDevices || !ids["new"] || !ids[oldest] || ids[next] {
		t.Fatalf("after a re-seen device and a new one: %d kept, new %v, re-seen %s %v, %s (now the oldest) %v",
			len(after), ids["new"], oldest, ids[oldest], next, ids[next])
	}
}

// TestPendingFoldersCapped: a device's offers are kept up to
// MaxPendingFoldersPerDevice, the oldest evicted; other devices' offers
// are not touched.
func TestPendingFoldersCapped(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutDevice(ctx, Device{ID: "D"}))
	must(t, db.PutDevice(ctx, Device{ID: "E"}))
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "E", FolderID: "e", FirstSeen: at(-1)}))
	const n = 3 * MaxPendingFoldersPerDevice
	for i := range n {
		must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "D", FolderID: fmt.Sprintf("f%04d", i), FirstSeen: at(i)}))
	}
	ps, err := db.PendingFolders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fromD int
	sawE := false
	for _, p := range ps {
		switch p.DeviceID {
		case "D":
			fromD++
			var i int
			fmt.Sscanf(p.FolderID, "f%d", &i)
			if i < n-MaxPendingFoldersPerDevice {
				t.Fatalf("offer %s kept though %d newer ones came", p.FolderID, n-i-1)
			}
		case "E":
			sawE = true
		}
	}
	if fromD != MaxPendingFoldersPerDevice || !sawE {
		t.Fatalf("%d offers of D kept (want %d), E's kept: %v", fromD, MaxPendingFoldersPerDevice, sawE)
	}
}
