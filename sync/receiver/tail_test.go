package receiver

import (
	"context"
	"testing"

	"lockstep/storage/blob"
	"lockstep/storage/db"
)

// TestReplayTail: records whose log object reached the store but whose
// commit the database lost come back when the receiver loads the folder;
// a log object that does not follow on is left alone.
func TestReplayTail(t *testing.T) {
	ctx := context.Background()
	n, _ := filled(t, 4)
	fk := folderKey(folderID)
	var logs []string
	if err := n.store.List(ctx, "r/"+fk+"/log/", func(i blob.Info) error { logs = append(logs, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(logs) < 2 {
		t.Fatalf("%d log objects", len(logs))
	}
	lastKey := logs[len(logs)-1]
	last, err := getLimited(ctx, n.store, lastKey, maxLogSize)
	if err != nil {
		t.Fatal(err)
	}
	// A database that lost the last batch: rebuilt without its log object.
	if err := n.store.Delete(ctx, lastKey); err != nil {
		t.Fatal(err)
	}
	behind := openDB(t)
	if _, err := Rebuild(ctx, behind, n.store, nil); err != nil {
		t.Fatal(err)
	}
	putBytes(t, n.store, lastKey, last)
	// And a stray object far beyond, which must not be taken.
	putBytes(t, n.store, logKey(fk, 1000), last)

	m := &node{id: n.id, db: behind, store: n.store, r: New(n.id, behind, n.store, nil)}
	if got := len(m.records(t)); got != len(n.records(t))-1 {
		t.Fatalf("the rebuilt database has %d records before the replay", got)
	}
	if err := m.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, n.records(t), m.records(t), true)
	if c1, c2 := n.chunkSizes(t), m.chunkSizes(t); len(c1) != len(c2) {
		t.Fatalf("chunks %d vs %d after the replay", len(c1), len(c2))
	}
	// Loading again changes nothing.
	if err := m.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, n.records(t), m.records(t), true)
}

// TestDeletionFlagKept: a record's readable deletion flag survives storing,
// serving (log objects) and a rebuild.
func TestDeletionFlagKept(t *testing.T) {
	ctx := context.Background()
	n, src := filled(t, 1)
	del := record(src, 2, 2)
	del.Deleted = true
	src.send(t, del)
	waitFor(t, "ack", func() bool { return src.lastAck() == 2 })
	check := func(what string, recs []db.SealedRecord) {
		t.Helper()
		if len(recs) != 2 || recs[0].Deleted || !recs[1].Deleted {
			t.Fatalf("%s: deletion flags %v, %v", what, len(recs) > 0 && recs[0].Deleted, len(recs) > 1 && recs[1].Deleted)
		}
	}
	check("stored", n.records(t))
	fresh := openDB(t)
	if _, err := Rebuild(ctx, fresh, n.store, nil); err != nil {
		t.Fatal(err)
	}
	m := &node{id: n.id, db: fresh, store: n.store}
	check("rebuilt", m.records(t))
}
