package blobtest

import (
	"errors"
	"slices"
	"testing"

	"lockstep/storage/blob"
)

// testDeleteBatch: blob.DeleteBatch, through the store's BatchDeleter if
// it has one, deletes the keys given (a missing one counts as deleted),
// returns them in order, and leaves every other blob.
func testDeleteBatch(t *testing.T, s blob.Store) {
	ctx := t.Context()
	keys := []string{"gc/a", "gc/b", "gc/c", "keep/d"}
	for i, k := range keys {
		put(t, s, k, data(uint64(i), 100+i))
	}
	want := []string{"gc/a", "gc/c", "gc/missing"}
	deleted, err := blob.DeleteBatch(ctx, s, want)
	if err != nil {
		t.Fatalf("DeleteBatch: %v", err)
	}
	if !slices.Equal(deleted, want) {
		t.Fatalf("DeleteBatch returned %q, want %q", deleted, want)
	}
	for _, k := range []string{"gc/a", "gc/c"} {
		if _, err := s.Stat(ctx, k); !errors.Is(err, blob.ErrNotExist) {
			t.Errorf("%s after DeleteBatch: %v, want ErrNotExist", k, err)
		}
	}
	for _, k := range []string{"gc/b", "keep/d"} {
		if _, err := s.Stat(ctx, k); err != nil {
			t.Errorf("%s, not in the batch, after DeleteBatch: %v", k, err)
		}
	}
	if got, err := blob.DeleteBatch(ctx, s, nil); err != nil || len(got) != 0 {
		t.Errorf("an empty batch: %q, %v", got, err)
	}
	if _, err := blob.DeleteBatch(ctx, s, []string{"gc/b", "../x"}); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("a batch with an invalid key: %v, want ErrInvalidKey", err)
	}
}
