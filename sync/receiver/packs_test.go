package receiver

import (
	"context"
	"testing"
)

// storedChunk reads chunk id of folderID the way n serves it.
func (n *node) storedChunk(ctx context.Context, id []byte) ([]byte, error) {
	f, err := n.r.held(folderID)
	if err != nil {
		return nil, err
	}
	return n.r.chunkBody(ctx, f, id, 1<<20)
}

// dropChunk deletes chunk id from n's store: its blob, or its pack, which
// must hold no other chunk.
func (n *node) dropChunk(t *testing.T, id []byte) {
	t.Helper()
	ctx := context.Background()
	loc, err := n.db.SealedChunk(ctx, folderID, id)
	if err != nil {
		t.Fatal(err)
	}
	key := chunkKey(folderKey(folderID), id)
	if loc.Pack != nil {
		key = packKey(folderKey(folderID), loc.Pack)
		if in, err := n.db.PackedChunks(ctx, folderID, loc.Pack); err != nil || len(in) != 1 {
			t.Fatalf("the pack of chunk %x holds %d chunks (%v)", id[:4], len(in), err)
		}
	}
	if err := n.store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
}
