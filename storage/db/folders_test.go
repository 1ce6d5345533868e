package db

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFolderRoundTripAndUpdate(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	for _, typ := range []FolderType{SendReceive, SendOnly, ReceiveOnly, Encrypted} {
		f := Folder{ID: "f-" + string(typ), Label: "Docs", Path: "/home/u/docs", Type: typ,
			CreatedAt: at(0), Paused: true, Error: "disk full"}
		must(t, db.PutFolder(ctx, f))
		got, err := db.Folder(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		f.CreatedAt = f.CreatedAt.UTC()
		if !reflect.DeepEqual(got, f) {
			t.Errorf("Folder = %+v\nwant     %+v", got, f)
		}
	}

	// Update with a zero CreatedAt keeps it; other fields change.
	must(t, db.PutFolder(ctx, Folder{ID: "f-sendonly", Path: "/p", Type: ReceiveOnly}))
	got, _ := db.Folder(ctx, "f-sendonly")
	want := Folder{ID: "f-sendonly", Path: "/p", Type: ReceiveOnly, CreatedAt: at(0).UTC()}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("updated folder = %+v\nwant %+v", got, want)
	}

	// A new folder with a zero CreatedAt gets now.
	must(t, db.PutFolder(ctx, Folder{ID: "new", Path: "/n", Type: SendReceive}))
	got, _ = db.Folder(ctx, "new")
	if time.Since(got.CreatedAt) > time.Minute || got.CreatedAt.After(time.Now()) {
		t.Errorf("CreatedAt of a new folder = %v, want about now", got.CreatedAt)
	}

	fs, err := db.Folders(ctx)
	if err != nil || len(fs) != 5 {
		t.Fatalf("Folders = %d, %v", len(fs), err)
	}
	for i := 1; i < len(fs); i++ {
		if fs[i-1].ID >= fs[i].ID {
			t.Errorf("Folders not ordered by ID: %q before %q", fs[i-1].ID, fs[i].ID)
		}
	}
}

func TestFolderConstraints(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	err := db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: "mirror"})
	if !errors.Is(err, ErrConstraint) || !strings.Contains(err.Error(), `"mirror"`) {
		t.Errorf("unknown type: %v, want ErrConstraint naming it", err)
	}
	if err := db.PutFolder(ctx, Folder{Path: "/f", Type: SendReceive}); !errors.Is(err, ErrConstraint) {
		t.Errorf("empty ID: %v, want ErrConstraint", err)
	}
	if fs, _ := db.Folders(ctx); len(fs) != 0 {
		t.Errorf("refused folders were stored: %v", fs)
	}
}

func TestFolderNotFound(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	if _, err := db.Folder(ctx, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Folder: %v", err)
	}
	if err := db.RemoveFolder(ctx, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveFolder: %v", err)
	}
	if _, err := db.FolderDevices(ctx, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("FolderDevices: %v", err)
	}
	if _, err := db.DeviceFolders(ctx, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeviceFolders: %v", err)
	}
	if err := db.UnshareFolder(ctx, "x", "y"); !errors.Is(err, ErrNotFound) {
		t.Errorf("UnshareFolder: %v", err)
	}
}

func TestShares(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}))
	must(t, db.PutFolder(ctx, Folder{ID: "g", Path: "/g", Type: SendOnly}))
	must(t, db.PutDevice(ctx, Device{ID: "B"}))
	must(t, db.PutDevice(ctx, Device{ID: "A"}))

	ids, err := db.FolderDevices(ctx, "f")
	if err != nil || ids == nil || len(ids) != 0 {
		t.Fatalf("FolderDevices of an unshared folder = %#v, %v; want empty, non-nil", ids, err)
	}
	must(t, db.ShareFolder(ctx, "f", "B"))
	must(t, db.ShareFolder(ctx, "f", "A"))
	must(t, db.ShareFolder(ctx, "f", "A")) // twice is fine
	must(t, db.ShareFolder(ctx, "g", "A"))
	if ids, err := db.FolderDevices(ctx, "f"); err != nil || !reflect.DeepEqual(ids, []string{"A", "B"}) {
		t.Errorf("FolderDevices(f) = %v, %v", ids, err)
	}
	if ids, err := db.DeviceFolders(ctx, "A"); err != nil || !reflect.DeepEqual(ids, []string{"f", "g"}) {
		t.Errorf("DeviceFolders(A) = %v, %v", ids, err)
	}

	err = db.ShareFolder(ctx, "f", "NOBODY")
	if !errors.Is(err, ErrConstraint) || !strings.Contains(err.Error(), "unknown device") {
		t.Errorf("share with an unknown device: %v, want ErrConstraint, unknown device", err)
	}
	err = db.ShareFolder(ctx, "nofolder", "A")
	if !errors.Is(err, ErrConstraint) || !strings.Contains(err.Error(), "unknown folder") {
		t.Errorf("share of an unknown folder: %v, want ErrConstraint, unknown folder", err)
	}

	must(t, db.UnshareFolder(ctx, "f", "B"))
	if err := db.UnshareFolder(ctx, "f", "B"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second UnshareFolder: %v, want ErrNotFound", err)
	}
	if ids, _ := db.FolderDevices(ctx, "f"); !reflect.DeepEqual(ids, []string{"A"}) {
		t.Errorf("FolderDevices(f) after unshare = %v", ids)
	}
	if _, err := db.Device(ctx, "B"); err != nil {
		t.Errorf("unsharing removed the device: %v", err)
	}
}

func TestRemoveFolderCascades(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}))
	must(t, db.PutFolder(ctx, Folder{ID: "g", Path: "/g", Type: SendReceive}))
	must(t, db.PutDevice(ctx, Device{ID: "A"}))
	must(t, db.ShareFolder(ctx, "f", "A"))
	must(t, db.ShareFolder(ctx, "g", "A"))
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "A", FolderID: "f"}))
	recs := []FileRecord{{Name: "x", Type: TypeFile, ModTime: at(0), Sequence: 1}}
	must(t, db.PutFiles(ctx, "f", LocalDevice, recs))
	must(t, db.PutFiles(ctx, "g", LocalDevice, recs))

	must(t, db.RemoveFolder(ctx, "f"))
	if ids, err := db.DeviceFolders(ctx, "A"); err != nil || !reflect.DeepEqual(ids, []string{"g"}) {
		t.Errorf("DeviceFolders after removing f = %v, %v", ids, err)
	}
	if _, err := db.File(ctx, "f", LocalDevice, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("file record of the removed folder: %v, want ErrNotFound", err)
	}
	if _, err := db.File(ctx, "g", LocalDevice, "x"); err != nil {
		t.Errorf("file record of the other folder: %v", err)
	}
	if ps, _ := db.PendingFolders(ctx); len(ps) != 1 {
		t.Errorf("pending offers after removing the folder = %v, want the offer kept", ps)
	}
	// Re-creating the folder does not bring back its shares or files.
	must(t, db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}))
	if ids, _ := db.FolderDevices(ctx, "f"); len(ids) != 0 {
		t.Errorf("re-created folder has shares %v", ids)
	}
}

func TestPendingFolders(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutDevice(ctx, Device{ID: "A"}))
	must(t, db.PutDevice(ctx, Device{ID: "B"}))
	if ps, err := db.PendingFolders(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("PendingFolders on empty db = %v, %v", ps, err)
	}
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "B", FolderID: "docs", Label: "Docs", FirstSeen: at(0)}))
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "A", FolderID: "docs", Label: "D", FirstSeen: at(1)}))
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "A", FolderID: "camera", FirstSeen: at(2)}))
	// Offered again: keeps first_seen, takes the new label.
	must(t, db.AddPendingFolder(ctx, PendingFolder{DeviceID: "B", FolderID: "docs", Label: "Documents", FirstSeen: at(9)}))

	ps, err := db.PendingFolders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []PendingFolder{
		{DeviceID: "A", FolderID: "camera", FirstSeen: at(2).UTC()},
		{DeviceID: "A", FolderID: "docs", Label: "D", FirstSeen: at(1).UTC()},
		{DeviceID: "B", FolderID: "docs", Label: "Documents", FirstSeen: at(0).UTC()},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Fatalf("PendingFolders = %+v\nwant %+v", ps, want)
	}

	err = db.AddPendingFolder(ctx, PendingFolder{DeviceID: "NOBODY", FolderID: "x"})
	if !errors.Is(err, ErrConstraint) || !strings.Contains(err.Error(), "unknown device") {
		t.Errorf("offer from an unknown device: %v, want ErrConstraint", err)
	}
	if err := db.AddPendingFolder(ctx, PendingFolder{DeviceID: "A"}); !errors.Is(err, ErrConstraint) {
		t.Errorf("offer with empty folder ID: %v, want ErrConstraint", err)
	}

	must(t, db.RemovePendingFolder(ctx, "A", "docs"))
	if err := db.RemovePendingFolder(ctx, "A", "docs"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second RemovePendingFolder: %v, want ErrNotFound", err)
	}
	if ps, _ := db.PendingFolders(ctx); len(ps) != 2 {
		t.Errorf("PendingFolders after remove = %v", ps)
	}
}
