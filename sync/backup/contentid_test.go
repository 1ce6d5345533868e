package backup

import (
	"testing"

	"lockstep/chunk"
	"lockstep/sync/index"
)

// TestContentID: versions with the same chunks have the same content ID,
// wherever they are stored; other chunks, or the same in another order,
// another; a deletion none.
func TestContentID(t *testing.T) {
	a, b := chunk.HashOf([]byte("a")), chunk.HashOf([]byte("b"))
	v := func(deleted bool, hs ...chunk.Hash) ReceiverVersion {
		r := index.Record{Name: "x", Deleted: deleted}
		for _, h := range hs {
			r.Blocks = append(r.Blocks, index.Block{Hash: h})
		}
		return ReceiverVersion{Path: "x", Deleted: deleted, rec: r}
	}
	ab, other := v(false, a, b), ReceiverVersion{Receiver: [32]byte{9}, rec: v(false, a, b).rec}
	if ab.ContentID() == "" || ab.ContentID() != other.ContentID() {
		t.Fatalf("the same chunks: %q and %q", ab.ContentID(), other.ContentID())
	}
	if v(false, b, a).ContentID() == ab.ContentID() || v(false, a).ContentID() == ab.ContentID() {
		t.Fatal("other chunks have the same content ID")
	}
	if got := v(true).ContentID(); got != "" {
		t.Fatalf("a deletion's content ID %q", got)
	}
}
