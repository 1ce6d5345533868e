package blobtest

import (
	"bytes"
	"fmt"
	"testing"

	"lockstep/storage/blob"
)

// BenchPut measures Put of size-byte blobs under chunk-like keys (new ones
// first, then replacing them), reporting MB/s and chunks/s.
func BenchPut(b *testing.B, s blob.Store, size int) {
	buf := data(1, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if err := s.Put(b.Context(), chunkKey(i), bytes.NewReader(buf), int64(size)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchPutBatched measures PutUnsynced of size-byte blobs with a Sync after
// every batch blobs (and at the end), reporting MB/s and chunks/s.
func BenchPutBatched(b *testing.B, s blob.Batcher, size, batch int) {
	buf := data(1, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if err := s.PutUnsynced(b.Context(), chunkKey(i), bytes.NewReader(buf), int64(size)); err != nil {
			b.Fatal(err)
		}
		i++
		if i%batch == 0 {
			if err := s.Sync(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := s.Sync(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "chunks/s")
}

// benchKeys is the number of distinct keys a benchmark cycles through, so
// that a long run does not hold gigabytes in a store.
const benchKeys = 1024

// chunkKey returns a key like a chunk store's: a spread of hex names.
func chunkKey(i int) string {
	return fmt.Sprintf("chunks/%08x", uint32(i%benchKeys)*2654435761)
}
