package db

import (
	"bytes"
	"errors"
	"testing"
)

// id16 is a pack ID filled with b.
func id16(b byte) []byte { return bytes.Repeat([]byte{b}, PackIDSize) }

func TestSealedPacks(t *testing.T) {
	db, ctx := receiverFolder(t)
	p1, p2 := id16(1), id16(2)
	chunks := []SealedChunk{
		{ID: id32(1), Size: 100, StoredAt: at(0), Pack: p1, Offset: 0},
		{ID: id32(2), Size: 50, StoredAt: at(0), Pack: p1, Offset: 100},
		{ID: id32(3), Size: 7, StoredAt: at(0), Pack: p2, Offset: 0},
		{ID: id32(4), Size: 9, StoredAt: at(0)},
	}
	if err := db.AppendSealed(ctx, "enc", []SealedRecord{rec(1, 1, 1, 1, 2, 3, 4)}, chunks); err != nil {
		t.Fatal(err)
	}
	for _, want := range chunks {
		got, err := db.SealedChunk(ctx, "enc", want.ID)
		if err != nil || !bytes.Equal(got.Pack, want.Pack) || got.Offset != want.Offset || got.Size != want.Size {
			t.Fatalf("SealedChunk(%x) = %+v, %v; want %+v", want.ID[:1], got, err, want)
		}
	}
	if _, err := db.SealedChunk(ctx, "enc", id32(9)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing chunk: %v", err)
	}
	usage, err := db.SealedPackUsage(ctx, "enc")
	if err != nil || len(usage) != 2 || usage[0].Chunks != 2 || usage[0].LiveBytes != 150 ||
		usage[1].Chunks != 1 || usage[1].LiveBytes != 7 {
		t.Fatalf("SealedPackUsage = %+v, %v", usage, err)
	}
	in1, err := db.PackedChunks(ctx, "enc", p1)
	if err != nil || len(in1) != 2 || in1[0].Offset != 0 || in1[1].Offset != 100 {
		t.Fatalf("PackedChunks = %+v, %v", in1, err)
	}

	// Repack: chunk 2 and 3 into pack 3; pack 2 is then unused.
	p3 := id16(3)
	moves := []SealedChunk{{ID: id32(2), Size: 50, Pack: p3, Offset: 0}, {ID: id32(3), Size: 7, Pack: p3, Offset: 50}}
	if err := db.MoveSealedChunks(ctx, "enc", moves); err != nil {
		t.Fatal(err)
	}
	usage, err = db.SealedPackUsage(ctx, "enc")
	if err != nil || len(usage) != 2 || !bytes.Equal(usage[1].Pack, p3) || usage[1].LiveBytes != 57 || usage[0].LiveBytes != 100 {
		t.Fatalf("after the move: %+v, %v", usage, err)
	}
	// A wrong size or an unknown chunk moves nothing.
	bad := [][]SealedChunk{
		{{ID: id32(1), Size: 100, Pack: p2, Offset: 0}, {ID: id32(4), Size: 10, Pack: p2, Offset: 100}},
		{{ID: id32(1), Size: 100, Pack: p2, Offset: 0}, {ID: id32(8), Size: 1, Pack: p2, Offset: 100}},
		{{ID: id32(1), Size: 100, Pack: id16(2)[:15], Offset: 0}},
		{{ID: id32(1), Size: 100, Pack: p2, Offset: -1}},
		{{ID: id32(1), Size: 100, Offset: 3}},
	}
	for i, m := range bad {
		if err := db.MoveSealedChunks(ctx, "enc", m); !errors.Is(err, ErrConstraint) {
			t.Fatalf("bad move %d: %v, want ErrConstraint", i, err)
		}
	}
	if c, _ := db.SealedChunk(ctx, "enc", id32(1)); !bytes.Equal(c.Pack, p1) {
		t.Fatalf("a failed move changed chunk 1: %+v", c)
	}
	// Unpacking: a move to no pack makes the chunk a blob of its own.
	if err := db.MoveSealedChunks(ctx, "enc", []SealedChunk{{ID: id32(1), Size: 100}}); err != nil {
		t.Fatal(err)
	}
	if usage, _ := db.SealedPackUsage(ctx, "enc"); len(usage) != 1 {
		t.Fatalf("after unpacking: %+v", usage)
	}
	if err := db.AppendSealed(ctx, "enc", nil, []SealedChunk{{ID: id32(5), Size: 1, Pack: id16(1)[:3]}}); !errors.Is(err, ErrConstraint) {
		t.Fatalf("short pack ID: %v", err)
	}
	if s, err := db.ReceiverStats(ctx, "enc"); err != nil || s.Chunks != 4 || s.StoredBytes != 166 {
		t.Fatalf("stats = %+v, %v", s, err)
	}
}
