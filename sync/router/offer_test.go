package router

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

// TestOwnFolderIsNoOffer: a peer announcing a folder that this node's
// configuration shares with it, before the folder runs here, is no offer;
// a folder this node does not share with it is.
func TestOwnFolderIsNoOffer(t *testing.T) {
	ctx := context.Background()
	peer := crypt.DeviceID{1}
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.PutFolder(ctx, db.Folder{ID: "mine", Path: t.TempDir(), Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	if err := d.PutDevice(ctx, db.Device{ID: peer.String()}); err != nil {
		t.Fatal(err)
	}
	if err := d.ShareFolder(ctx, "mine", peer.String()); err != nil {
		t.Fatal(err)
	}
	r := New(crypt.DeviceID{9}, d, slog.New(slog.DiscardHandler), nil)
	r.recordOffer(ctx, peer, &protocol.Folder{Id: "mine"})
	r.recordOffer(ctx, peer, &protocol.Folder{Id: "theirs"})
	pending, err := d.PendingFolders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].FolderID != "theirs" {
		t.Fatalf("pending offers = %+v, want only theirs", pending)
	}
}
