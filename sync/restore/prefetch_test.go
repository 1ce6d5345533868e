package restore

import (
	"context"
	"testing"

	"lockstep/crypt"
	"lockstep/sync/protocol"
)

// TestPrefetcherOff: a prefetcher made off (where scrypt gets no huge
// pages) fetches nothing it is offered; with no connection at all, any
// request would panic.
func TestPrefetcherOff(t *testing.T) {
	p := newPrefetcher(context.Background(), nil, testFolder, false)
	id := crypt.ChunkID{1}
	p.offer(&protocol.SealedRecord{Chunks: [][]byte{id[:]}})
	p.stop()
	if n, size := p.count(); n != 0 || size != 0 {
		t.Errorf("an off prefetcher fetched %d chunks (%d bytes)", n, size)
	}
	if body := p.take(id); body != nil {
		t.Errorf("an off prefetcher has chunk %v", id)
	}
	p.close()
}
