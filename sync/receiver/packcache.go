package receiver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"

	"lockstep/storage/blob"
	"lockstep/sync/receiver/pack"
)

// Reading packs whole, for a remote store.
const (
	// packCacheBytes bounds the memory of the packs a packCache keeps once
	// read: eight pack buffers, 26 MiB. A recovery of four large files at
	// once reads from about four packs at a time, and a pack leaves as
	// soon as its last chunk is served. (Before packs left early, eight
	// were too few: a recovery read a third of its packs twice; twelve
	// packs of 4 MiB were 72 MiB of a receiver's 180 MB. Six of 2 MiB read
	// 1,370-1,450 MB for 1,114 stored, eight 1,295.)
	packCacheBytes = 8 * packBufSize
	// packsTouched is how many packs a packCache remembers were read from
	// by range: a pack among them is read whole at its next read.
	packsTouched = 64
	// packLoads is how many packs a packCache reads at once; other
	// readers wait for them.
	packLoads = 4
)

// packCache serves chunks of packs from whole packs read once, for a store
// where each request costs a round trip (S3): a recovery reading chunks in
// the order they were stored makes two GETs per pack instead of one per
// chunk. The first chunk read from a pack is read by range; a pack is read
// whole only when a second chunk of it is asked for while the first is
// among the packsTouched last, so that reads in another order (a check's,
// by chunk ID) do not read a whole pack for every chunk. A copy serves
// each chunk once: a chunk asked for again is read from the store, so a
// check after a recovery sees the store as it is, damage included. (Lockstep
// never rewrites a pack under its key: a pack ID is random and written
// once, a repack writes a new pack.) It keeps the packs most recently used
// up to packCacheBytes. Safe for concurrent use.
type packCache struct {
	loads chan struct{} // a slot per pack being read
	bufs  *packBuffers
	max   int64 // bytes of the packs kept: packCacheBytes

	mu      sync.Mutex
	packs   map[string]*cachedPack // by key
	touched []touch                // packs read by range, the latest last
	lru     []*cachedPack          // loaded packs, least recently used first
	bytes   int64                  // held by the packs in lru (their buffers' capacity)
	// held is the capacity of the buffers of packs dropped from the cache
	// that readers still hold, chunks lent for answers not yet sent: a
	// peer that stops reading must not keep a pack per answer queued.
	held int64
}

// touch is a pack read by range, and the offset of the chunk read.
type touch struct {
	key string
	off int64
}

// cachedPack is one pack, read or being read.
type cachedPack struct {
	key   string
	ready chan struct{} // closed once data or err is set
	err   error
	// Guarded by packCache.mu once ready:
	data    []byte         // nil once dropped
	refs    int            // readers of data
	served  map[int64]bool // offsets of the chunks served, from data or by range before it
	chunks  int            // in the pack, from its trailer; 0 if unknown
	dropped bool           // out of the cache; data goes back to free with the last reader
	held    bool           // dropped while readers held data: counted in packCache.held
}

// newPackCache returns an empty packCache that reads packs into buffers
// of bufs.
func newPackCache(bufs *packBuffers) *packCache {
	return &packCache{loads: make(chan struct{}, packLoads), bufs: bufs, max: packCacheBytes, packs: make(map[string]*cachedPack)}
}

// getRange is blob.GetRange of the pack key in s, served from the pack
// read whole. A missing pack is blob.ErrNotExist, as from s; a read that
// failed is tried again by the next caller.
func (c *packCache) getRange(ctx context.Context, s blob.Store, key string, off, n int64, fn func(io.Reader) error) error {
	data, release, err := c.borrow(ctx, s, key, off, n)
	if err != nil {
		return err
	}
	if release == nil {
		return blob.GetRange(ctx, s, key, off, n, fn)
	}
	defer release()
	return fn(bytes.NewReader(data))
}

// borrow returns the up to n bytes at off of the pack key as a part of the
// pack read whole, the caller's to read until it calls release; or a nil
// release when the bytes are to be read from s by range (the pack is not
// among those read whole, or served that chunk already). A chunk sent
// from the pack itself costs no copy: a recovery's 32 chunk requests in
// flight held a copy of a megabyte each.
func (c *packCache) borrow(ctx context.Context, s blob.Store, key string, off, n int64) (data []byte, release func(), err error) {
	for {
		p, load := c.entry(key, off)
		if p == nil {
			return nil, nil, nil
		}
		if load {
			c.load(ctx, s, p)
		}
		select {
		case <-p.ready:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if p.err != nil {
			if ctx.Err() == nil && (errors.Is(p.err, context.Canceled) || errors.Is(p.err, context.DeadlineExceeded)) {
				continue // the reader that loaded it gave up, not this one
			}
			return nil, nil, p.err
		}
		data, again := c.hold(p, off)
		if again {
			// Served from this copy before: read the store, which may
			// have changed since (a check after a recovery must see it).
			return nil, nil, nil
		}
		if data == nil {
			continue // dropped meanwhile
		}
		off = min(off, int64(len(data)))
		end := min(off+n, int64(len(data)))
		var once sync.Once
		return data[off:end:end], func() { once.Do(func() { c.release(p) }) }, nil
	}
}

// hold returns p's data for a reader of the chunk at off, who calls
// release when done; nil if p was dropped and its buffer reused; or again
// if p served that chunk already.
func (c *packCache) hold(p *cachedPack, off int64) (data []byte, again bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.data == nil {
		return nil, false
	}
	if p.served[off] {
		return nil, true
	}
	if p.served == nil {
		p.served = make(map[int64]bool)
	}
	p.served[off] = true
	p.refs++
	if p.chunks > 0 && len(p.served) >= p.chunks && !p.dropped {
		// Every chunk served: a recovery is done with this pack, and
		// its buffer goes to the next as soon as this reader is.
		c.drop(p)
	}
	return p.data, false
}

// drop takes p, loaded, out of the cache; its buffer is recycled once no
// reader holds it. Called with c.mu held.
func (c *packCache) drop(p *cachedPack) {
	if i := slices.Index(c.lru, p); i >= 0 {
		c.lru = slices.Delete(c.lru, i, i+1)
		c.bytes -= int64(cap(p.data))
	}
	delete(c.packs, p.key)
	p.dropped = true
	if p.refs > 0 && p.data != nil {
		p.held = true
		c.held += int64(cap(p.data))
	}
	c.recycle(p)
}

// mayLend reports whether a chunk may be lent from a pack's buffer rather
// than copied: while the packs dropped but still held by lent chunks take
// less than the cache itself.
func (c *packCache) mayLend() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held < c.max
}

// release ends a reader's hold of p's data.
func (c *packCache) release(p *cachedPack) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p.refs--
	c.recycle(p)
}

// recycle keeps the buffer of p, dropped and read by no one, for another
// pack. Called with c.mu held.
func (c *packCache) recycle(p *cachedPack) {
	if !p.dropped || p.refs > 0 || p.data == nil {
		return
	}
	if p.held {
		p.held = false
		c.held -= int64(cap(p.data))
	}
	c.bufs.put(p.data)
	p.data = nil
}

// readInto reads r to its end into buf, and beyond it into a new slice if
// r holds more.
func readInto(r io.Reader, buf []byte) ([]byte, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return buf[:n], nil
		}
		if err != nil {
			return buf[:n], err
		}
	}
	rest, err := io.ReadAll(r)
	if len(rest) == 0 {
		return buf, err
	}
	return append(buf[:n:n], rest...), err
}

// entry returns the cache's entry for key, marked most recently used, and
// whether the caller must load it (a new entry); or nil if key is not
// among the packs touched lately, which it now is, by a read of the chunk
// at off.
func (c *packCache) entry(key string, off int64) (*cachedPack, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.packs[key]; ok {
		if i := slices.Index(c.lru, p); i >= 0 {
			c.lru = append(slices.Delete(c.lru, i, i+1), p)
		}
		return p, false
	}
	i := slices.IndexFunc(c.touched, func(t touch) bool { return t.key == key })
	if i < 0 {
		if len(c.touched) == packsTouched {
			c.touched = slices.Delete(c.touched, 0, 1)
		}
		c.touched = append(c.touched, touch{key, off})
		return nil, false
	}
	first := c.touched[i].off
	c.touched = slices.Delete(c.touched, i, i+1)
	// The chunk read by range counts as served: asked for again, it is
	// read from the store again.
	p := &cachedPack{key: key, ready: make(chan struct{}), served: map[int64]bool{first: true}}
	c.packs[key] = p
	return p, true
}

// load reads p's pack whole, then keeps it, dropping the least recently
// used packs beyond c.max bytes, or forgets it if the read failed.
func (c *packCache) load(ctx context.Context, s blob.Store, p *cachedPack) {
	select {
	case c.loads <- struct{}{}:
		buf := c.bufs.get()
		p.err = s.Get(ctx, p.key, func(r io.Reader) error {
			var err error
			p.data, err = readInto(r, buf)
			return err
		})
		if p.err == nil && len(p.data) < packBufSize/2 && cap(p.data) == packBufSize {
			// A small pack (the end of a fetch) in a buffer of its own.
			p.data = bytes.Clone(p.data)
			c.bufs.put(buf)
		}
		if p.data == nil {
			p.data = buf[:0]
		}
		if p.err == nil {
			p.chunks = chunkCount(p.data)
		}
		<-c.loads
	case <-ctx.Done():
		p.err = ctx.Err()
	}
	c.mu.Lock()
	if p.err != nil {
		delete(c.packs, p.key)
		p.dropped = true
		c.recycle(p)
	} else {
		c.lru = append(c.lru, p)
		c.bytes += int64(cap(p.data))
		for c.bytes > c.max && len(c.lru) > 0 {
			c.drop(c.lru[0])
		}
	}
	c.mu.Unlock()
	close(p.ready)
}

// chunkCount is the number of chunks the trailer of the pack data lists,
// or 0 if data is no pack.
func chunkCount(data []byte) int {
	if len(data) < pack.FooterSize {
		return 0
	}
	n, err := pack.ParseFooter(data[len(data)-pack.FooterSize:], int64(len(data)))
	if err != nil {
		return 0
	}
	return int(n / pack.EntrySize)
}
