package db

import (
	"bytes"
	"encoding/hex"
	"slices"
	"testing"
)

// TestSealedLooseChunksAfter: loose chunk rows come in pages, by ID in
// the order of their hex, packed ones left out; a page starts after the
// ID given.
func TestSealedLooseChunksAfter(t *testing.T) {
	db, ctx := receiverFolder(t)
	var chunks []SealedChunk
	var ids []byte
	// IDs 0x00.., 0x09.., 0x0a.. and 0xf0..: hex order is byte order.
	for _, b := range []byte{0xf0, 0x0a, 0x09, 0x00} {
		chunks = append(chunks, SealedChunk{ID: id32(b), Size: int64(b) + 1, StoredAt: at(0)})
		ids = append(ids, b)
	}
	chunks = append(chunks, SealedChunk{ID: id32(0x05), Size: 3, StoredAt: at(0), Pack: id16(1)})
	ids = append(ids, 0x05)
	if err := db.AppendSealed(ctx, "enc", []SealedRecord{rec(1, 1, 1, ids...)}, chunks); err != nil {
		t.Fatal(err)
	}
	var got []string
	var after []byte
	for range 10 {
		page, err := db.SealedLooseChunksAfter(ctx, "enc", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			if c.Pack != nil || c.Size != int64(c.ID[0])+1 {
				t.Fatalf("row %+v", c)
			}
			got = append(got, hex.EncodeToString(c.ID))
		}
		after = page[len(page)-1].ID
	}
	want := []string{hex.EncodeToString(id32(0)), hex.EncodeToString(id32(9)), hex.EncodeToString(id32(0x0a)), hex.EncodeToString(id32(0xf0))}
	if !slices.Equal(got, want) || !slices.IsSorted(got) {
		t.Fatalf("loose chunks %q, want %q", got, want)
	}
	if page, err := db.SealedLooseChunksAfter(ctx, "other", nil, 10); err != nil || len(page) != 0 {
		t.Fatalf("unknown folder: %v, %v", page, err)
	}
}

// TestSealedRefsAfter: records come in pages in log order, with their
// chunk lists and no payload.
func TestSealedRefsAfter(t *testing.T) {
	db, ctx := receiverFolder(t)
	chunks := []SealedChunk{{ID: id32(1), Size: 1, StoredAt: at(0)}, {ID: id32(2), Size: 2, StoredAt: at(0)}}
	recs := []SealedRecord{rec(3, 1, 1, 1), rec(7, 1, 2, 1, 2), rec(9, 1, 3)}
	if err := db.AppendSealed(ctx, "enc", recs, chunks); err != nil {
		t.Fatal(err)
	}
	page, err := db.SealedRefsAfter(ctx, "enc", 3, 1)
	if err != nil || len(page) != 1 || page[0].Seq != 7 || !bytes.Equal(page[0].Chunks, recs[1].Chunks) || page[0].Sealed != nil {
		t.Fatalf("page after 3: %+v, %v", page, err)
	}
	page, err = db.SealedRefsAfter(ctx, "enc", 0, 10)
	if err != nil || len(page) != 3 || page[0].Seq != 3 || page[2].Seq != 9 || len(page[2].Chunks) != 0 {
		t.Fatalf("all: %+v, %v", page, err)
	}
}
