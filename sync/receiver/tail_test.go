package receiver

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
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
	testutil.Eventually(t, waitTimeout, "ack", func() bool { return src.lastAck() == 2 })
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

// TestVersionsRequest: a device asks for the records of one file, or of
// all, and gets them with their stored times; a file key that is not held
// gets none.
func TestVersionsRequest(t *testing.T) {
	ctx := context.Background()
	n, src := filled(t, 3)
	again := record(src, 4, 2) // a second version of file 2
	src.send(t, again)
	testutil.Eventually(t, waitTimeout, "ack", func() bool { return src.lastAck() == 4 })
	ask := func(fileKey []byte, size uint32) (*protocol.SealedIndex, error) {
		data, err := n.r.Request(ctx, src.id, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_VERSIONS, Folder: folderID, FileKey: fileKey, Size: size})
		if err != nil {
			return nil, err
		}
		var idx protocol.SealedIndex
		return &idx, proto.Unmarshal(data, &idx)
	}
	idx, err := ask(again.GetFileKey(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.GetRecords()) != 2 || idx.GetRecords()[1].GetCounter() != 4 || idx.GetRecords()[0].GetStoredNs() == 0 {
		t.Fatalf("versions of file 2: %v", idx.GetRecords())
	}
	if idx, err := ask(nil, 1<<20); err != nil || len(idx.GetRecords()) != 4 {
		t.Fatalf("versions of every file: %v, %v", idx, err)
	}
	if idx, err := ask(bytes.Repeat([]byte{0xab}, 32), 1<<20); err != nil || len(idx.GetRecords()) != 0 {
		t.Fatalf("versions of an unknown file: %v, %v", idx, err)
	}
	if _, err := ask(nil, 10); !errors.Is(err, protocol.ErrInvalidFile) {
		t.Fatalf("an answer larger than asked for: %v", err)
	}
}

// TestScheduledPrune: Serve applies a folder's policy on its own.
func TestScheduledPrune(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, src := filled(t, 1)
	again := record(src, 2, 1) // a second version of file 1
	src.send(t, again)
	testutil.Eventually(t, waitTimeout, "ack", func() bool { return src.lastAck() == 2 })
	if err := n.r.SetRetention(ctx, folderID, Policy{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.r.Serve(ctx, 10*time.Millisecond) }()
	testutil.Eventually(t, waitTimeout, "the old version to go", func() bool { return len(n.records(t)) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
