package db

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// reopen opens the database at path, to check what a restart keeps.
func reopen(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestDevicePauseAndRename(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lockstep.db")
	db := reopen(t, path)
	ctx := context.Background()
	must(t, db.PutDevice(ctx, Device{ID: "D", Name: "laptop", Untrusted: true}))
	if d, _ := db.Device(ctx, "D"); d.Paused {
		t.Fatal("a new device is paused")
	}
	must(t, db.SetDevicePaused(ctx, "D", true))
	must(t, db.RenameDevice(ctx, "D", "old laptop"))
	// Re-adding the device (its name and addresses) leaves it paused.
	must(t, db.PutDevice(ctx, Device{ID: "D", Name: "old laptop", Addresses: []string{"dynamic"}, Untrusted: true}))
	db.Close()
	db = reopen(t, path)
	d, err := db.Device(ctx, "D")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Paused || d.Name != "old laptop" || !d.Untrusted {
		t.Fatalf("after pause, rename and a reopen: %+v, want paused, named 'old laptop', untrusted", d)
	}
	must(t, db.SetDevicePaused(ctx, "D", false))
	if d, _ := db.Device(ctx, "D"); d.Paused {
		t.Fatal("resumed device still paused")
	}
	for name, err := range map[string]error{
		"pause":  db.SetDevicePaused(ctx, "nope", true),
		"rename": db.RenameDevice(ctx, "nope", "x"),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of an unknown device: %v, want ErrNotFound", name, err)
		}
	}
}

func TestFolderPauseAndType(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lockstep.db")
	db := reopen(t, path)
	ctx := context.Background()
	must(t, db.PutFolder(ctx, Folder{ID: "f", Path: "/x", Type: SendReceive}))
	must(t, db.PutFolder(ctx, Folder{ID: "enc", Path: "/y", Type: Encrypted}))
	must(t, db.SetFolderPaused(ctx, "f", true))
	must(t, db.SetFolderType(ctx, "f", ReceiveOnly))
	db.Close()
	db = reopen(t, path)
	f, err := db.Folder(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if !f.Paused || f.Type != ReceiveOnly {
		t.Fatalf("after pause, type change and a reopen: %+v", f)
	}
	must(t, db.SetFolderPaused(ctx, "f", false))
	if f, _ := db.Folder(ctx, "f"); f.Paused {
		t.Fatal("resumed folder still paused")
	}
	for _, c := range []struct {
		id   string
		typ  FolderType
		want error
	}{
		{"f", Encrypted, ErrConstraint},
		{"f", "bogus", ErrConstraint},
		{"enc", SendOnly, ErrConstraint},
		{"nope", SendOnly, ErrNotFound},
	} {
		if err := db.SetFolderType(ctx, c.id, c.typ); !errors.Is(err, c.want) {
			t.Errorf("SetFolderType(%s, %s) = %v, want %v", c.id, c.typ, err, c.want)
		}
	}
	if f, _ := db.Folder(ctx, "enc"); f.Type != Encrypted {
		t.Errorf("encrypted folder became %s", f.Type)
	}
	if err := db.SetFolderPaused(ctx, "nope", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("pausing an unknown folder: %v", err)
	}
}

func TestLocalNamesFlagged(t *testing.T) {
	db := fileDB(t, 3)
	ctx := context.Background()
	flagged := []FileRecord{
		{Name: "kept", Type: TypeFile, ModTime: at(0), Sequence: 4, Flags: 1},
		{Name: "gone", Type: TypeFile, ModTime: at(0), Sequence: 5, Flags: 1 | 4, Deleted: true},
		{Name: "other", Type: TypeFile, ModTime: at(0), Sequence: 6, Flags: 2},
	}
	must(t, db.PutFiles(ctx, "f", LocalDevice, flagged))
	// A peer's record with the flag is not this node's own.
	must(t, db.PutFiles(ctx, "f", "PEER", []FileRecord{{Name: "theirs", Type: TypeFile, ModTime: at(0), Sequence: 1, Flags: 1}}))
	got, err := db.LocalNamesFlagged(ctx, "f", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "gone" || got[1] != "kept" {
		t.Fatalf("flagged 1: %v, want [gone kept]", got)
	}
	if got, _ := db.LocalNamesFlagged(ctx, "f", 8); len(got) != 0 {
		t.Fatalf("flagged 8: %v, want none", got)
	}
}
