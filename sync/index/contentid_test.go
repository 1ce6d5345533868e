package index

import (
	"testing"

	"lockstep/chunk"
	"lockstep/storage/db"
)

// TestContentIDOf: a stored record's content ID is that of its blocks,
// whatever their offsets; other blocks give another.
func TestContentIDOf(t *testing.T) {
	bs := []Block{{Size: 3, Hash: chunk.HashOf([]byte("abc"))}, {Offset: 3, Size: 2, Hash: chunk.HashOf([]byte("de"))}}
	r := Record{Name: "x", Blocks: bs}
	got, err := ContentIDOf(toDB(&r))
	if err != nil || got != ContentID(bs) || len(got) != 64 {
		t.Fatalf("ContentIDOf = %q, %v; want %q", got, err, ContentID(bs))
	}
	if ContentID(bs[:1]) == got || ContentID([]Block{bs[1], bs[0]}) == got {
		t.Fatal("other blocks have the same content ID")
	}
	if _, err := ContentIDOf(db0(r, []byte{5, 1})); err == nil {
		t.Fatal("damaged chunks gave a content ID")
	}
}

// db0 is r's stored record with its chunks replaced.
func db0(r Record, chunks []byte) (f db.FileRecord) {
	f = toDB(&r)
	f.Chunks = chunks
	return f
}
