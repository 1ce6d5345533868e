package db

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestPeerIndexID(t *testing.T) {
	db, ctx := stateDB(t)
	if _, err := db.PeerIndexID(ctx, "docs", "B"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before set: %v, want ErrNotFound", err)
	}
	for _, id := range []uint64{1, math.MaxInt64 + 1, math.MaxUint64, 42} {
		must(t, db.SetPeerIndexID(ctx, "docs", "B", id))
		if got, err := db.PeerIndexID(ctx, "docs", "B"); err != nil || got != id {
			t.Fatalf("PeerIndexID = %d, %v; want %d", got, err, id)
		}
	}
	// Per folder and per device.
	must(t, db.SetPeerIndexID(ctx, "docs", "R", 7))
	must(t, db.SetPeerIndexID(ctx, "music", "B", 8))
	for _, c := range []struct {
		folder, dev string
		want        uint64
	}{{"docs", "B", 42}, {"docs", "R", 7}, {"music", "B", 8}} {
		if got, err := db.PeerIndexID(ctx, c.folder, c.dev); err != nil || got != c.want {
			t.Errorf("PeerIndexID(%s, %s) = %d, %v; want %d", c.folder, c.dev, got, err, c.want)
		}
	}
	if _, err := db.PeerIndexID(ctx, "music", "R"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unset pair: %v, want ErrNotFound", err)
	}

	if err := db.SetPeerIndexID(ctx, "docs", "B", 0); !errors.Is(err, ErrConstraint) {
		t.Errorf("ID 0: %v, want ErrConstraint", err)
	}
	if err := db.SetPeerIndexID(ctx, "gone", "B", 1); !errors.Is(err, ErrConstraint) {
		t.Errorf("unknown folder: %v, want ErrConstraint", err)
	}
	if err := db.SetPeerIndexID(ctx, "docs", "X", 1); !errors.Is(err, ErrConstraint) {
		t.Errorf("unknown device: %v, want ErrConstraint", err)
	}
}

func TestPendingEnvelope(t *testing.T) {
	db, ctx := stateDB(t)
	if _, err := db.PendingEnvelope(ctx, "docs", "R"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before set: %v, want ErrNotFound", err)
	}
	if err := db.DeletePendingEnvelope(ctx, "docs", "R"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting a missing envelope: %v, want ErrNotFound", err)
	}
	must(t, db.SetPendingEnvelope(ctx, "docs", "R", []byte("first")))
	must(t, db.SetPendingEnvelope(ctx, "docs", "R", []byte("second\x00envelope")))
	must(t, db.SetPendingEnvelope(ctx, "music", "R", []byte("other")))
	if got, err := db.PendingEnvelope(ctx, "docs", "R"); err != nil || !bytes.Equal(got, []byte("second\x00envelope")) {
		t.Fatalf("PendingEnvelope = %q, %v", got, err)
	}
	must(t, db.DeletePendingEnvelope(ctx, "docs", "R"))
	if _, err := db.PendingEnvelope(ctx, "docs", "R"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after delete: %v, want ErrNotFound", err)
	}
	if got, err := db.PendingEnvelope(ctx, "music", "R"); err != nil || string(got) != "other" {
		t.Errorf("the other folder's envelope = %q, %v", got, err)
	}

	for _, env := range [][]byte{nil, {}} {
		if err := db.SetPendingEnvelope(ctx, "docs", "R", env); !errors.Is(err, ErrConstraint) {
			t.Errorf("envelope %#v: %v, want ErrConstraint", env, err)
		}
	}
	if err := db.SetPendingEnvelope(ctx, "docs", "X", []byte("e")); !errors.Is(err, ErrConstraint) {
		t.Errorf("unknown device: %v, want ErrConstraint", err)
	}
}

// TestPeerStateDiesWithFolderAndDevice checks that removing a device or a
// folder forgets what was known of that device or in that folder, and
// nothing else.
func TestPeerStateDiesWithFolderAndDevice(t *testing.T) {
	db, ctx := stateDB(t)
	for _, f := range []string{"docs", "music"} {
		for _, d := range []string{"R", "B"} {
			must(t, db.SetPeerIndexID(ctx, f, d, 5))
			must(t, db.SetPendingEnvelope(ctx, f, d, []byte("env")))
			must(t, db.SetReceiverCursor(ctx, f, d, 3))
			must(t, db.RaiseReceiverOrigins(ctx, f, d, map[string]OriginMark{"O": {Seen: 1}}))
		}
	}
	must(t, db.RemoveDevice(ctx, "B"))
	must(t, db.PutDevice(ctx, Device{ID: "B"}))
	must(t, db.RemoveFolder(ctx, "music"))
	must(t, db.PutFolder(ctx, Folder{ID: "music", Path: "/music", Type: SendReceive}))

	for _, f := range []string{"docs", "music"} {
		for _, d := range []string{"R", "B"} {
			kept := f == "docs" && d == "R"
			_, err := db.PeerIndexID(ctx, f, d)
			if kept != (err == nil) || (!kept && !errors.Is(err, ErrNotFound)) {
				t.Errorf("PeerIndexID(%s, %s): %v, want kept %v", f, d, err, kept)
			}
			_, err = db.PendingEnvelope(ctx, f, d)
			if kept != (err == nil) || (!kept && !errors.Is(err, ErrNotFound)) {
				t.Errorf("PendingEnvelope(%s, %s): %v, want kept %v", f, d, err, kept)
			}
			v, err := db.ReceiverView(ctx, f, d)
			if err != nil || (v.Cursor == 3) != kept {
				t.Errorf("ReceiverView(%s, %s) = %+v, %v; want kept %v", f, d, v, err, kept)
			}
			o, err := db.ReceiverOrigins(ctx, f, d)
			if err != nil || (len(o) == 1) != kept {
				t.Errorf("ReceiverOrigins(%s, %s) = %v, %v; want kept %v", f, d, o, err, kept)
			}
		}
	}
}
