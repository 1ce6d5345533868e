package restore

import (
	"context"
	"sync"

	"lockstep/crypt"
	"lockstep/sync/protocol"
)

// While scrypt opens the folder key (about a second), the record log
// arrives, but nothing can be opened or written, and a core is idle. The
// records list their encrypted chunk IDs in the clear, so a prefetcher
// fetches their chunks in that time, in the log's order, up to a budget,
// and the writer takes them from memory instead of waiting a round trip
// for each. What it fetches is opened and checked exactly as a fetched
// chunk is; what fails to come is fetched again. At first it took only
// the chunks of small files (records of one chunk), with a budget of 32
// MiB; those were fetched long before scrypt ended, and taking large
// files' chunks too, up to 96 MiB, recovered the standard set in
// 3.47-4.05 s (median 3.73 s) against 3.64-4.94 s (median 3.94 s), seven
// alternating runs. The price: a wrong password fetches up to the budget
// for nothing (what a second of scrypt lets through, on a slow link).
//
// The budget was 96 MiB; 48 MiB keeps a recovery's memory outside scrypt
// near 165 MB (it was 250-270 MB) at no cost the benchmarks could see.
// It once ran only where the heap had huge pages (on small pages the
// prefetch's memory made scrypt's faults dearer); since scrypt's work
// area is returned after it, it runs everywhere, and a recovery took
// 5.33-6.14 s with it on small pages against 6.01-6.18 s on huge pages.
const (
	prefetchBudget   = 48 << 20 // bytes of chunks held
	prefetchInFlight = 16
)

// prefetcher fetches sealed chunks offered to it until stopped.
type prefetcher struct {
	ctx    context.Context
	conn   *protocol.Conn
	folder string
	wake   chan struct{} // cap 1: queue has grown or stop was called
	done   chan struct{} // closed when the loop has ended
	wg     sync.WaitGroup

	mu      sync.Mutex
	queue   []crypt.ChunkID
	seen    map[crypt.ChunkID]bool
	bodies  map[crypt.ChunkID][]byte
	held    int64 // bytes in bodies and taken from it
	fetched int   // chunks in bodies and taken from it
	stopped bool
}

// newPrefetcher starts a prefetcher over conn; requests end with ctx. One
// made with on false fetches nothing: it is stopped from the start.
func newPrefetcher(ctx context.Context, conn *protocol.Conn, folder string, on bool) *prefetcher {
	p := &prefetcher{ctx: ctx, conn: conn, folder: folder, wake: make(chan struct{}, 1), done: make(chan struct{}),
		seen: map[crypt.ChunkID]bool{}, bodies: map[crypt.ChunkID][]byte{}, stopped: !on}
	if !on {
		close(p.done)
		return p
	}
	go p.loop()
	return p
}

// offer queues the chunks of a record, each once.
func (p *prefetcher) offer(sr *protocol.SealedRecord) {
	if sr.GetDeleted() {
		return
	}
	p.mu.Lock()
	for _, c := range sr.GetChunks() {
		id := crypt.ChunkID(c)
		if p.stopped || p.seen[id] {
			continue
		}
		p.seen[id] = true
		p.queue = append(p.queue, id)
	}
	p.mu.Unlock()
	p.signal()
}

func (p *prefetcher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// loop starts the queued fetches, at most prefetchInFlight at once, until
// stopped or the budget is held.
func (p *prefetcher) loop() {
	defer close(p.done)
	slots := make(chan struct{}, prefetchInFlight)
	for {
		p.mu.Lock()
		stopped, full := p.stopped, p.held >= prefetchBudget
		var id crypt.ChunkID
		next := len(p.queue) > 0
		if next {
			id = p.queue[0]
			p.queue = p.queue[1:]
		}
		p.mu.Unlock()
		switch {
		case stopped || full:
			return
		case !next:
			select {
			case <-p.wake:
			case <-p.ctx.Done():
				return
			}
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-p.ctx.Done():
			return
		}
		p.wg.Go(func() {
			defer func() { <-slots }()
			p.fetch(id)
		})
	}
}

// fetch requests one chunk and keeps it; a failure is left for the
// writer's own request to meet and report.
func (p *prefetcher) fetch(id crypt.ChunkID) {
	body, err := p.conn.Request(p.ctx, &protocol.Request{
		Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: p.folder, ChunkId: id[:], Size: uint32(crypt.MaxSealedChunkSize),
	})
	if err != nil {
		return
	}
	p.mu.Lock()
	p.bodies[id] = body
	p.held += int64(len(body))
	p.fetched++
	p.mu.Unlock()
}

// stop starts no more fetches and waits for those under way.
func (p *prefetcher) stop() {
	p.mu.Lock()
	p.stopped = true
	p.queue = nil
	p.mu.Unlock()
	p.signal()
	<-p.done
	p.wg.Wait()
}

// count returns how many chunks were fetched and their bytes.
func (p *prefetcher) count() (int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fetched, p.held
}

// take returns the sealed chunk id if it was fetched, once, or nil.
func (p *prefetcher) take(id crypt.ChunkID) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	body := p.bodies[id]
	delete(p.bodies, id)
	return body
}

// close stops the prefetcher and gives back the chunks nobody took.
func (p *prefetcher) close() {
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, body := range p.bodies {
		protocol.Recycle(body)
		delete(p.bodies, id)
	}
}
