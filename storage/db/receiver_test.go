package db

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// id32 is a 32-byte ID filled with b.
func id32(b byte) []byte { return bytes.Repeat([]byte{b}, SealedIDSize) }

func receiverFolder(t *testing.T) (*DB, context.Context) {
	t.Helper()
	db, _ := openTest(t)
	ctx := context.Background()
	if err := db.PutFolder(ctx, Folder{ID: "enc", Path: "/x", Type: Encrypted}); err != nil {
		t.Fatal(err)
	}
	return db, ctx
}

func TestReceiverLogID(t *testing.T) {
	db, ctx := receiverFolder(t)
	if _, err := db.ReceiverLogID(ctx, "enc"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("log ID before init: %v, want ErrNotFound", err)
	}
	if _, err := db.InitReceiverLog(ctx, "enc", 0); !errors.Is(err, ErrConstraint) {
		t.Fatalf("log ID 0: %v, want ErrConstraint", err)
	}
	got, err := db.InitReceiverLog(ctx, "enc", math.MaxUint64)
	if err != nil || got != math.MaxUint64 {
		t.Fatalf("InitReceiverLog = %d, %v", got, err)
	}
	// A second init keeps the first ID.
	if got, err := db.InitReceiverLog(ctx, "enc", 7); err != nil || got != math.MaxUint64 {
		t.Fatalf("second InitReceiverLog = %d, %v; want the first ID", got, err)
	}
	if got, err := db.ReceiverLogID(ctx, "enc"); err != nil || got != math.MaxUint64 {
		t.Fatalf("ReceiverLogID = %d, %v", got, err)
	}
	if _, err := db.InitReceiverLog(ctx, "nope", 1); !errors.Is(err, ErrConstraint) {
		t.Fatalf("unknown folder: %v, want ErrConstraint", err)
	}
}

func rec(seq int64, origin byte, counter uint64, chunks ...byte) SealedRecord {
	var ids []byte
	for _, c := range chunks {
		ids = append(ids, id32(c)...)
	}
	return SealedRecord{Seq: seq, Origin: id32(origin), Counter: counter, FileKey: id32(origin + 100),
		Sealed: []byte{byte(seq)}, Chunks: ids, StoredAt: at(int(seq))}
}

func TestAppendSealed(t *testing.T) {
	db, ctx := receiverFolder(t)
	chunks := []SealedChunk{{ID: id32(1), Size: 100, StoredAt: at(0)}, {ID: id32(2), Size: 50, StoredAt: at(0)}}
	// Chunk 1 referenced twice: counted twice in ReferencedBytes.
	if err := db.AppendSealed(ctx, "enc", []SealedRecord{rec(1, 9, 1, 1), rec(2, 9, 2, 1, 2)}, chunks); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		recs []SealedRecord
		ch   []SealedChunk
	}{
		{"sequence equal to the highest", []SealedRecord{rec(2, 8, 1)}, nil},
		{"sequence below the highest", []SealedRecord{rec(1, 8, 1)}, nil},
		{"sequences not increasing", []SealedRecord{rec(4, 8, 1), rec(4, 8, 2)}, nil},
		{"duplicate origin and counter", []SealedRecord{rec(3, 9, 2)}, nil},
		{"chunk not held", []SealedRecord{rec(3, 8, 1, 3)}, nil},
		{"chunk of size 0", []SealedRecord{rec(3, 8, 1, 3)}, []SealedChunk{{ID: id32(3), Size: 0}}},
		{"short origin", []SealedRecord{{Seq: 3, Origin: []byte{1}, FileKey: id32(1)}}, nil},
		{"counter too large", []SealedRecord{rec(3, 8, math.MaxInt64+1)}, nil},
		{"ragged chunk list", []SealedRecord{{Seq: 3, Origin: id32(1), FileKey: id32(1), Chunks: []byte{1}}}, nil},
	}
	for _, c := range cases {
		if err := db.AppendSealed(ctx, "enc", c.recs, c.ch); !errors.Is(err, ErrConstraint) {
			t.Errorf("%s: %v, want ErrConstraint", c.name, err)
		}
	}
	// A failed append stored nothing, not even its chunks.
	if ok, _ := db.HasSealedChunk(ctx, "enc", id32(3)); ok {
		t.Fatal("chunk of a failed append was stored")
	}
	// Sequence n+1 and a gap both work; an already held chunk is kept.
	more := []SealedChunk{{ID: id32(1), Size: 999}, {ID: id32(3), Size: 10, StoredAt: at(5)}}
	if err := db.AppendSealed(ctx, "enc", []SealedRecord{rec(3, 8, math.MaxInt64, 3), rec(5, 8, 1)}, more); err != nil {
		t.Fatal(err)
	}
	got, err := db.SealedRecordsAfter(ctx, "enc", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Seq != 2 || got[1].Seq != 3 || got[2].Seq != 5 {
		t.Fatalf("records after 1: %+v", got)
	}
	want := rec(3, 8, math.MaxInt64, 3)
	g := got[1]
	if !bytes.Equal(g.Origin, want.Origin) || g.Counter != want.Counter || !bytes.Equal(g.FileKey, want.FileKey) ||
		!bytes.Equal(g.Sealed, want.Sealed) || !bytes.Equal(g.Chunks, want.Chunks) || !g.StoredAt.Equal(want.StoredAt) {
		t.Fatalf("record 3 = %+v, want %+v", g, want)
	}
	if got, _ := db.SealedRecordsAfter(ctx, "enc", 0, 2); len(got) != 2 || got[1].Seq != 2 {
		t.Fatalf("limit 2: %+v", got)
	}
	if held, err := db.SealedCountersHeld(ctx, "enc", id32(9), []uint64{2, 3}); !held[2] || held[3] || err != nil {
		t.Fatalf("SealedCountersHeld(9, [2 3]) = %v, %v", held, err)
	}
	if seq, err := db.ReceiverSequence(ctx, "enc"); seq != 5 || err != nil {
		t.Fatalf("ReceiverSequence = %d, %v", seq, err)
	}

	s, err := db.ReceiverStats(ctx, "enc")
	if err != nil {
		t.Fatal(err)
	}
	wantStats := ReceiverStats{Records: 4, Files: 2, Chunks: 3, StoredBytes: 160, ReferencedBytes: 100 + 150 + 10, LogSequence: 5}
	if s != wantStats {
		t.Fatalf("stats = %+v, want %+v", s, wantStats)
	}
	origins, err := db.SealedOrigins(ctx, "enc")
	if err != nil || len(origins) != 2 {
		t.Fatalf("origins = %+v, %v", origins, err)
	}
	if !bytes.Equal(origins[0].Origin, id32(8)) || origins[0].MaxCounter != math.MaxInt64 || !origins[0].LastStored.Equal(at(5)) {
		t.Fatalf("origin 8 = %+v", origins[0])
	}
	if origins[1].MaxCounter != 2 || !origins[1].LastStored.Equal(at(2)) {
		t.Fatalf("origin 9 = %+v", origins[1])
	}
	var sizes []int64
	if err := db.SealedChunks(ctx, "enc", func(c SealedChunk) error { sizes = append(sizes, c.Size); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 3 || sizes[0] != 100 || sizes[1] != 50 || sizes[2] != 10 {
		t.Fatalf("chunk sizes %v", sizes)
	}

	// Removing the folder removes everything of the receiver's.
	if err := db.RemoveFolder(ctx, "enc"); err != nil {
		t.Fatal(err)
	}
	if s, err := db.ReceiverStats(ctx, "enc"); err != nil || s != (ReceiverStats{}) {
		t.Fatalf("stats after removal = %+v, %v", s, err)
	}
	if _, err := db.ReceiverLogID(ctx, "enc"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("log after removal: %v", err)
	}
}

func TestReceiverEnvelope(t *testing.T) {
	db, ctx := receiverFolder(t)
	if _, _, err := db.ReceiverEnvelope(ctx, "enc"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no envelope: %v", err)
	}
	if err := db.PutReceiverEnvelope(ctx, "enc", []byte("a"), 1); err != nil {
		t.Fatal(err)
	}
	for _, gen := range []int64{0, 1} { // n-1 and n
		if err := db.PutReceiverEnvelope(ctx, "enc", []byte("b"), gen); !errors.Is(err, ErrConstraint) {
			t.Fatalf("generation %d: %v, want ErrConstraint", gen, err)
		}
	}
	if err := db.PutReceiverEnvelope(ctx, "enc", nil, 5); !errors.Is(err, ErrConstraint) {
		t.Fatalf("empty envelope: %v", err)
	}
	if err := db.PutReceiverEnvelope(ctx, "enc", []byte("c"), 2); err != nil { // n+1
		t.Fatal(err)
	}
	env, gen, err := db.ReceiverEnvelope(ctx, "enc")
	if err != nil || string(env) != "c" || gen != 2 {
		t.Fatalf("envelope = %q, %d, %v", env, gen, err)
	}
	if err := db.PutReceiverEnvelope(ctx, "nope", []byte("a"), 1); !errors.Is(err, ErrConstraint) {
		t.Fatalf("unknown folder: %v", err)
	}
}

// TestHeldInBatches looks up more chunks and counters than one query asks
// about, some held and some not.
func TestHeldInBatches(t *testing.T) {
	db, ctx := receiverFolder(t)
	idOf := func(i int) []byte {
		id := make([]byte, SealedIDSize)
		binary.BigEndian.PutUint32(id, uint32(i))
		return id
	}
	var chunks []SealedChunk
	var recs []SealedRecord
	for i := range 3 * heldBatch {
		if i%3 == 0 { // every third chunk and counter is held
			chunks = append(chunks, SealedChunk{ID: idOf(i), Size: 1, StoredAt: at(1)})
			recs = append(recs, SealedRecord{Seq: int64(len(recs) + 1), Origin: id32(9), Counter: uint64(i),
				FileKey: id32(1), Sealed: []byte{1}, Chunks: idOf(i), StoredAt: at(1)})
		}
	}
	if err := db.AppendSealed(ctx, "enc", recs, chunks); err != nil {
		t.Fatal(err)
	}
	var ids [][]byte
	var counters []uint64
	for i := range 3*heldBatch + 7 {
		ids = append(ids, idOf(i))
		counters = append(counters, uint64(i))
	}
	counters = append(counters, math.MaxUint64)
	heldIDs, err := db.SealedChunksHeld(ctx, "enc", ids)
	if err != nil {
		t.Fatal(err)
	}
	heldCounters, err := db.SealedCountersHeld(ctx, "enc", id32(9), counters)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3*heldBatch + 7 {
		want := i%3 == 0 && i < 3*heldBatch
		if heldIDs[string(idOf(i))] != want || heldCounters[uint64(i)] != want {
			t.Fatalf("%d: chunk held %v, counter held %v, want %v", i, heldIDs[string(idOf(i))], heldCounters[uint64(i)], want)
		}
	}
	if len(heldIDs) != heldBatch || len(heldCounters) != heldBatch {
		t.Fatalf("%d chunks and %d counters held, want %d each", len(heldIDs), len(heldCounters), heldBatch)
	}
	if other, err := db.SealedCountersHeld(ctx, "enc", id32(8), counters); err != nil || len(other) != 0 {
		t.Fatalf("another origin: %v, %v", other, err)
	}
	if none, err := db.SealedChunksHeld(ctx, "enc", nil); err != nil || len(none) != 0 {
		t.Fatalf("no IDs: %v, %v", none, err)
	}
}
