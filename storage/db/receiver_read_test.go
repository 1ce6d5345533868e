package db

import (
	"bytes"
	"testing"
)

func TestSealedChunksAfter(t *testing.T) {
	db, ctx := receiverFolder(t)
	var chunks []SealedChunk
	for b := byte(1); b <= 5; b++ {
		chunks = append(chunks, SealedChunk{ID: id32(b), Size: int64(b) * 10, StoredAt: at(0)})
	}
	if err := db.AppendSealed(ctx, "enc", []SealedRecord{rec(1, 9, 1, 1, 2, 3, 4, 5)}, chunks); err != nil {
		t.Fatal(err)
	}
	var got []byte
	var after []byte
	for {
		page, err := db.SealedChunksAfter(ctx, "enc", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			if c.Size != int64(c.ID[0])*10 {
				t.Fatalf("chunk %x: size %d", c.ID[:1], c.Size)
			}
			got = append(got, c.ID[0])
		}
		after = page[len(page)-1].ID
	}
	if !bytes.Equal(got, []byte{1, 2, 3, 4, 5}) {
		t.Fatalf("pages gave chunks %v, want 1..5 once each in order", got)
	}
	if page, err := db.SealedChunksAfter(ctx, "other", nil, 10); err != nil || len(page) != 0 {
		t.Fatalf("unknown folder: %d chunks, %v", len(page), err)
	}
}
