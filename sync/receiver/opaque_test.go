package receiver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

// opaqueNode is newNode for a receiver that stores new folders under its
// store key.
func opaqueNode(t *testing.T, key crypt.StoreKey, peers ...crypt.DeviceID) *node {
	t.Helper()
	ctx := context.Background()
	n := &node{id: randomID(), db: openDB(t), store: localStore(t)}
	if err := n.db.PutFolder(ctx, db.Folder{ID: folderID, Label: "Holidays", Path: "/srv/f", Type: db.Encrypted}); err != nil {
		t.Fatal(err)
	}
	n.r = New(n.id, n.db, n.store, nil)
	n.r.SetStoreKey(key, true)
	for _, p := range peers {
		n.share(t, p)
	}
	if err := n.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpaqueStore: a receiver with a store key keeps a new folder under a
// segment that says nothing of its ID, with its meta sealed and its log
// objects naming no folder; it works as any other (records, check), and
// the store alone rebuilds it with the key, not without.
func TestOpaqueStore(t *testing.T) {
	ctx := context.Background()
	key, err := crypt.NewStoreKey()
	if err != nil {
		t.Fatal(err)
	}
	src := newTrusted()
	n := opaqueNode(t, key, src.id)
	connectTrusted(t, n, src)
	if err := src.conn.ClusterConfig(ctx, clusterConfig(n, src, 0, 0)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		src.send(t, record(src, uint64(i), byte(i), src.addChunk(10+i), src.addChunk(200<<10)))
		testutil.Eventually(t, waitTimeout, "record stored", func() bool { return src.lastAck() == int64(i) })
	}

	seg := key.Segment(folderID)
	var keys []string
	err = n.store.List(ctx, "", func(info blob.Info) error {
		keys = append(keys, info.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "r/"+seg+"/") {
			t.Errorf("object %s outside the folder's opaque segment %s", k, seg)
		}
		var data []byte
		if err := n.store.Get(ctx, k, func(r io.Reader) error {
			var err error
			data, err = io.ReadAll(r)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(k, "/meta.json"):
			if !crypt.IsSealedMeta(data) || bytes.Contains(data, []byte("Holidays")) || bytes.Contains(data, []byte(src.id.String())) {
				t.Errorf("the meta object is not sealed: %q", data)
			}
		case strings.Contains(k, "/log/"):
			var idx protocol.SealedIndex
			if err := proto.Unmarshal(data, &idx); err != nil || idx.GetFolder() != "" {
				t.Errorf("log object %s names folder %q (%v)", k, idx.GetFolder(), err)
			}
		}
	}
	if len(keys) < 5 {
		t.Fatalf("the store holds %d objects: %v", len(keys), keys)
	}
	if got := n.r.ClusterFolders(ctx, src.id); len(got) != 1 || got[0].GetLabel() != "Holidays" {
		t.Fatalf("the opaque folder's cluster config entry: %v", got)
	}
	if rep, err := n.r.Check(ctx, folderID, CheckOptions{}); err != nil || !rep.Clean() {
		t.Fatalf("check of an opaque folder: %+v, %v", rep.Problems, err)
	}

	// Rebuilt from the store with the key: the same records, the same
	// segment; without the key: refused, saying why.
	fresh := openDB(t)
	if _, err := Rebuild(ctx, fresh, n.store, nil); !errors.Is(err, ErrNoStoreKey) {
		t.Fatalf("a rebuild without the store key: %v, want ErrNoStoreKey", err)
	}
	fresh = openDB(t)
	ids, err := RebuildWithKey(ctx, fresh, n.store, &key, nil)
	if err != nil || len(ids) != 1 || ids[0] != folderID {
		t.Fatalf("a rebuild with the store key: %v, %v", ids, err)
	}
	m := &node{id: n.id, db: fresh, store: n.store}
	sameRecords(t, n.records(t), m.records(t), true)
	if got, err := fresh.ReceiverSegment(ctx, folderID); err != nil || got != seg {
		t.Fatalf("rebuilt segment %q, %v; want %q", got, err, seg)
	}
	f, err := fresh.Folder(ctx, folderID)
	if err != nil || f.Label != "Holidays" {
		t.Fatalf("rebuilt folder %+v, %v", f, err)
	}

	// A receiver with the key but no longer storing new folders opaquely
	// keeps this one where it is; one without the key can't load it.
	m.r = New(m.id, fresh, n.store, nil)
	m.r.SetStoreKey(key, false)
	if err := m.r.Reload(ctx); err != nil || !m.r.Holds(folderID) {
		t.Fatalf("reload with the key: %v, holds %v", err, m.r.Holds(folderID))
	}
	keyless := New(m.id, fresh, n.store, nil)
	if err := keyless.Reload(ctx); !errors.Is(err, ErrNoStoreKey) || keyless.Holds(folderID) {
		t.Fatalf("reload without the key: %v, holds %v", err, keyless.Holds(folderID))
	}
}

// TestReadableStoreKept: a receiver given a store key keeps a folder it
// held before under its readable segment.
func TestReadableStoreKept(t *testing.T) {
	ctx := context.Background()
	n, _ := filled(t, 1)
	key, _ := crypt.NewStoreKey()
	r := New(n.id, n.db, n.store, nil)
	r.SetStoreKey(key, true)
	if err := r.Reload(ctx); err != nil || !r.Holds(folderID) {
		t.Fatalf("reload with a store key: %v", err)
	}
	if got, err := n.db.ReceiverSegment(ctx, folderID); err != nil || got != folderKey(folderID) {
		t.Fatalf("segment %q, %v; want the readable one kept", got, err)
	}
}

// TestRebuildTwoSegments: a folder held readably, removed (its objects
// stay) and held again under --opaque-store is in the store twice; a
// rebuild takes the copy written last, not both into one.
func TestRebuildTwoSegments(t *testing.T) {
	ctx := context.Background()
	n, src := filled(t, 2)
	if err := n.db.RemoveFolder(ctx, folderID); err != nil {
		t.Fatal(err)
	}
	key, _ := crypt.NewStoreKey()
	r := New(n.id, n.db, n.store, nil)
	r.SetStoreKey(key, true)
	if err := n.db.PutFolder(ctx, db.Folder{ID: folderID, Label: "again", Type: db.Encrypted}); err != nil {
		t.Fatal(err)
	}
	n.r = r
	n.share(t, src.id)
	if err := r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	seg, err := n.db.ReceiverSegment(ctx, folderID)
	if err != nil || seg != key.Segment(folderID) {
		t.Fatalf("the folder held again is under %q (%v), want its opaque segment", seg, err)
	}
	logID, _ := n.db.ReceiverLogID(ctx, folderID)

	fresh := openDB(t)
	ids, err := RebuildWithKey(ctx, fresh, n.store, &key, nil)
	if err != nil || len(ids) != 1 {
		t.Fatalf("rebuild: %v, %v; want the folder once", ids, err)
	}
	got, _ := fresh.ReceiverSegment(ctx, folderID)
	gotLog, _ := fresh.ReceiverLogID(ctx, folderID)
	f, _ := fresh.Folder(ctx, folderID)
	if got != seg || gotLog != logID || f.Label != "again" {
		t.Fatalf("rebuilt segment %q, log %x, label %q; want %q, %x, the folder held now", got, gotLog, f.Label, seg, logID)
	}
	if recs, _ := fresh.SealedRecordsAfter(ctx, folderID, 0, 100); len(recs) != 0 {
		t.Fatalf("the rebuilt folder took %d records of the old copy", len(recs))
	}
}
