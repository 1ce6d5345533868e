package restore

import (
	"context"
	"testing"

	"lockstep/crypt"
	"lockstep/sync/protocol"
)

// TestPrefetcherOff: a prefetcher made off (where scrypt gets no huge
// pages) runs no loop and takes in nothing it is offered.
func TestPrefetcherOff(t *testing.T) {
	p := newPrefetcher(context.Background(), nil, testFolder, false)
	defer p.close()
	select {
	case <-p.done:
	default:
		t.Fatal("an off prefetcher runs its fetch loop")
	}
	id := crypt.ChunkID{1}
	p.offer(&protocol.SealedRecord{Chunks: [][]byte{id[:]}})
	p.mu.Lock()
	queued := len(p.queue) + len(p.seen)
	p.mu.Unlock()
	if queued != 0 {
		t.Errorf("an off prefetcher queued what it was offered")
	}
	p.stop()
	if n, _ := p.count(); n != 0 || p.take(id) != nil {
		t.Errorf("an off prefetcher fetched %d chunks", n)
	}
}
