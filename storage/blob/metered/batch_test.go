package metered_test

import (
	"strings"
	"testing"

	"lockstep/storage/blob"
	"lockstep/storage/blob/limit"
	"lockstep/storage/blob/mem"
	"lockstep/storage/blob/metered"
)

// TestDeleteBatchThroughLayersCounts: a batch over layers over a store
// without batches is counted one request a key, as the bottom store
// deletes them.
func TestDeleteBatchThroughLayersCounts(t *testing.T) {
	ctx := t.Context()
	m := metered.NewMeter()
	s := metered.New(limit.New(mem.New(), limit.Options{Concurrency: 4}), m)
	var keys []string
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if err := s.Put(ctx, k, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if _, err := blob.DeleteBatch(ctx, s, keys); err != nil {
		t.Fatal(err)
	}
	if got := m.Snapshot().Delete.Requests; got != 5 {
		t.Errorf("5 deletes on a store without batches counted as %d DELETE requests", got)
	}
}
