package receiver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/sync/receiver/pack"
)

// Pack sizes.
const (
	// defaultPackBelow: a sealed chunk shorter than this goes into a pack,
	// a longer one is a blob of its own. Every chunk of a file but its
	// last is at least chunk.MinSize (128 KiB), so this packs small files
	// and the tails of large ones, not the bulk of large files: packing
	// those too (a 512 KiB threshold takes about half of them) made the
	// ingest benchmark slower (11.2 s against 8.0-8.9 s) and doubled the
	// receiver's peak memory, for objects that are large already.
	defaultPackBelow = 128 << 10
	// defaultPackTarget is about the largest pack: one is written once its
	// bodies reach it.
	defaultPackTarget = 16 << 20
	// remotePackTarget is the pack size on a remote store (SetRemoteStore),
	// where every chunk is packed: a PUT of 4 MiB to versitygw on the
	// development VM took 350 MB/s with four or more at once, against
	// 200 MB/s for chunk-sized objects (370 KiB) and 255 MB/s for 16 MiB.
	// Packs of 2 MiB made as many requests again, in the same time, and
	// halved the memory a receiver holds in packs (packCache): serving a
	// recovery, it peaked at 92-97 MiB, against 101-113 with 4 MiB.
	remotePackTarget = 2 << 20
	// remotePackBelow is the pack threshold on a remote store: chunks of
	// 1 MiB and more (up to crypt.MaxChunkSize, 8 MiB) are objects big
	// enough on their own, and a pack stays within a buffer of
	// packBufSize.
	remotePackBelow = 1 << 20
	// packUploads bounds the packs a remote store's ingests fill or write
	// at once, and so the memory they hold: 4 MiB PUTs to versitygw took
	// 233 MB/s one at a time, 329 MB/s four at a time, 350 MB/s sixteen at
	// a time. (Bounding only the writes let up to a pack per fetch in
	// flight wait: 516 MB peak RSS.) Four hold 13 MiB.
	packUploads = 4
)

// SetRemoteStore tunes the receiver for a store where every request costs
// a round trip and a signature (S3): every chunk shorter than
// remotePackBelow goes into packs of about remotePackTarget, written in parallel as they fill, and
// chunks are served from packs read whole and kept for a while
// (packCache), not one ranged GET each. Call it before Reload.
func (r *Receiver) SetRemoteStore() {
	r.packBelow.Store(remotePackBelow)
	r.packTarget.Store(remotePackTarget)
	r.packBufs = newPackBuffers()
	r.packUploads = make(chan struct{}, packUploads)
	r.packs = newPackCache(r.packBufs)
}

// packBufSize is the size of the buffers of a remote store's packs (and
// packCache's): a pack of remotePackTarget with its last chunk (shorter
// than remotePackBelow) and the trailer of a pack of small files fits
// (44 bytes an entry; a pack of chunks under 600 bytes outgrows its
// buffer, which is then a slice of its own). Fresh buffers, cleared and
// faulted in, cost an ingest of 1 GiB 1.1 s of CPU and a recovery 2.5 s.
const packBufSize = remotePackTarget + remotePackBelow + 256<<10

// packBuffers keeps buffers of packBufSize for reuse, a few: the ingest's
// packs being written and the packs packCache reads. Safe for concurrent
// use.
type packBuffers struct{ free chan []byte }

// packBuffersKept is how many unused buffers packBuffers keeps: enough
// for the packs being written, not so many that an idle receiver holds
// much. With two kept, not four, an S3 receiver's peaks were 94–99 MB
// ingesting and 111–117 MB serving a recovery, against 96–102 and
// 120–126 MB, in the same time and CPU (2 alternating pairs).
const packBuffersKept = 2

func newPackBuffers() *packBuffers { return &packBuffers{free: make(chan []byte, packBuffersKept)} }

// get returns a buffer of packBufSize, reused if one is free.
func (b *packBuffers) get() []byte {
	select {
	case buf := <-b.free:
		return buf[:packBufSize]
	default:
		return make([]byte, packBufSize)
	}
}

// put keeps buf for reuse if it is one of get's and fewer than
// packBuffersKept are kept. Its caller must not use it any more.
func (b *packBuffers) put(buf []byte) {
	if cap(buf) != packBufSize {
		return
	}
	select {
	case b.free <- buf[:packBufSize]:
	default:
	}
}

// packKey is the store key of the pack id of the folder stored under fk.
func packKey(fk string, id []byte) string { return "r/" + fk + "/p/" + hex.EncodeToString(id) }

// newPackID returns a random pack ID.
func newPackID() []byte {
	id := make([]byte, db.PackIDSize)
	_, _ = rand.Read(id) // never fails
	return id
}

// packer gathers the small chunks of one fetch into packs of about
// target bytes and writes each (unsynced when the store is a
// blob.Batcher) once full or at flush. Every pack it starts is pending in
// its folder, safe from garbage collection, until release. Safe for
// concurrent use.
type packer struct {
	store  blob.Store
	f      *folder
	target int
	bufs   *packBuffers // buffers for new packs; nil: none
	// uploads holds a slot per pack being filled or written, if not nil:
	// a fetch that needs a new pack waits for one, holding its own slot.
	uploads chan struct{}

	mu      sync.Mutex
	cur     *pack.Builder
	id      []byte
	claimed [][]byte
}

// release ends the protection of the packer's packs: their chunks are
// committed, or they are garbage. A pack it did not write is dropped.
func (p *packer) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		p.cur, p.id = nil, nil
		p.releaseSlot()
	}
	p.f.pendingMu.Lock()
	defer p.f.pendingMu.Unlock()
	for _, id := range p.claimed {
		delete(p.f.pending, string(id))
	}
	p.claimed = nil
}

// isPending reports whether the pack id is one an ingest is filling or
// has yet to commit.
func (f *folder) isPending(id []byte) bool {
	f.pendingMu.Lock()
	defer f.pendingMu.Unlock()
	return f.pending[string(id)]
}

// add puts body into the current pack and returns where it is; it writes
// the pack when it is full.
func (p *packer) add(ctx context.Context, id, body []byte) (db.SealedChunk, error) {
	p.mu.Lock()
	if p.cur == nil {
		p.mu.Unlock()
		if err := p.acquire(ctx); err != nil {
			return db.SealedChunk{}, err
		}
		p.mu.Lock()
		if p.cur != nil {
			p.releaseSlot() // another call started one meanwhile
		} else {
			p.cur, p.id = p.newBuilder(), newPackID()
			p.claimed = append(p.claimed, p.id)
			p.f.pendingMu.Lock()
			if p.f.pending == nil {
				p.f.pending = make(map[string]bool)
			}
			p.f.pending[string(p.id)] = true
			p.f.pendingMu.Unlock()
		}
	}
	e := p.cur.Add(id, body)
	loc := db.SealedChunk{ID: id, Size: e.Length, Pack: p.id, Offset: e.Offset}
	var full *pack.Builder
	var fullID []byte
	if p.cur.Len() >= p.target {
		full, fullID, p.cur, p.id = p.cur, p.id, nil, nil
	}
	p.mu.Unlock()
	if full != nil {
		if err := p.write(ctx, fullID, full); err != nil {
			return db.SealedChunk{}, err
		}
	}
	return loc, nil
}

// acquire waits for a slot of p.uploads, if p has them, for a new pack.
func (p *packer) acquire(ctx context.Context) error {
	if p.uploads == nil {
		return nil
	}
	select {
	case p.uploads <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// releaseSlot gives back the slot of a pack written or dropped.
func (p *packer) releaseSlot() {
	if p.uploads != nil {
		<-p.uploads
	}
}

// flush writes the current pack, if it holds a chunk.
func (p *packer) flush(ctx context.Context) error {
	p.mu.Lock()
	b, id := p.cur, p.id
	p.cur, p.id = nil, nil
	p.mu.Unlock()
	if b == nil {
		return nil
	}
	return p.write(ctx, id, b)
}

// newBuilder returns a Builder for a new pack, in a buffer of p.bufs.
func (p *packer) newBuilder() *pack.Builder {
	if p.bufs == nil {
		return new(pack.Builder)
	}
	return pack.NewBuilder(p.bufs.get())
}

// write stores the pack b as id and, once it is stored, gives its buffer
// back to p.bufs (not after a failure: an HTTP transport may still be
// reading a body after it answered).
func (p *packer) write(ctx context.Context, id []byte, b *pack.Builder) (err error) {
	data := b.Finish()
	if p.bufs != nil && cap(data) == packBufSize {
		defer func() {
			if err == nil {
				p.bufs.put(data)
			}
		}()
	}
	defer p.releaseSlot()
	key := packKey(p.f.fk, id)
	if batcher, ok := p.store.(blob.Batcher); ok {
		err = batcher.PutUnsynced(ctx, key, bytes.NewReader(data), int64(len(data)))
	} else {
		err = p.store.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
	}
	if err != nil {
		return fmt.Errorf("storing pack %x: %w", id, err)
	}
	return nil
}

// readChunk calls fn with the body of the chunk loc places, of loc.Size
// bytes at most: a range of its pack, or its own blob. A missing chunk or
// pack is blob.ErrNotExist.
func (r *Receiver) readChunk(ctx context.Context, f *folder, loc db.SealedChunk, limit int64, fn func(io.Reader) error) error {
	if loc.Pack == nil {
		return r.store.Get(ctx, chunkKey(f.fk, loc.ID), func(rd io.Reader) error { return fn(io.LimitReader(rd, limit)) })
	}
	if r.packs != nil {
		return r.packs.getRange(ctx, r.store, packKey(f.fk, loc.Pack), loc.Offset, min(loc.Size, limit), fn)
	}
	return blob.GetRange(ctx, r.store, packKey(f.fk, loc.Pack), loc.Offset, min(loc.Size, limit), fn)
}

// chunkData returns the body of the chunk loc places, up to limit bytes,
// for protocol.Recycle to take back: a part of a pack the cache holds,
// lent (protocol.Lend), or a pooled buffer.
func (r *Receiver) chunkData(ctx context.Context, f *folder, loc db.SealedChunk, limit int64) ([]byte, error) {
	read := r.readChunk
	if loc.Pack != nil && r.packs != nil {
		data, release, err := r.packs.borrow(ctx, r.store, packKey(f.fk, loc.Pack), loc.Offset, min(loc.Size, limit))
		if err != nil {
			return nil, err
		}
		if release != nil {
			if len(data) == 0 {
				release()
				return nil, nil
			}
			if !r.packs.mayLend() {
				// Evicted packs held by chunks in flight already take
				// as much as the cache: a copy.
				cp := append(protocol.Buffer(len(data)), data...)
				release()
				return cp, nil
			}
			protocol.Lend(data, release)
			return data, nil
		}
		// By range, as the cache says: asking it again would count as a
		// second read of the pack, and read it whole.
		read = r.readRange
	}
	var data []byte
	err := read(ctx, f, loc, limit, func(rd io.Reader) error {
		// Sized from the chunk list: growing a buffer from nothing costs
		// more than reading the chunk.
		buf := bytes.NewBuffer(protocol.Buffer(int(min(loc.Size, limit)) + bytes.MinRead))
		_, err := buf.ReadFrom(rd)
		data = buf.Bytes()
		return err
	})
	return data, err
}

// readRange is readChunk of a chunk in a pack, past the pack cache.
func (r *Receiver) readRange(ctx context.Context, f *folder, loc db.SealedChunk, limit int64, fn func(io.Reader) error) error {
	return blob.GetRange(ctx, r.store, packKey(f.fk, loc.Pack), loc.Offset, min(loc.Size, limit), fn)
}

// chunkBody returns the stored body of f's chunk id, up to limit+1
// bytes, for protocol.Recycle to take back: a part of a pack the cache
// holds, lent (protocol.Lend), or a pooled buffer. A chunk moved by a
// repack while it was read is read again where it went.
func (r *Receiver) chunkBody(ctx context.Context, f *folder, id []byte, limit int64) ([]byte, error) {
	for try := 0; ; try++ {
		loc, err := r.db.SealedChunk(ctx, f.id, id)
		if errors.Is(err, db.ErrNotFound) {
			// Not listed: a blob of its own if anywhere (a fetch whose
			// commit is pending, or a store restored by hand).
			loc, err = db.SealedChunk{ID: id, Size: 512 << 10}, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := r.chunkData(ctx, f, loc, limit+1)
		if errors.Is(err, blob.ErrNotExist) && loc.Pack != nil && try == 0 {
			if now, lerr := r.db.SealedChunk(ctx, f.id, id); lerr == nil && !bytes.Equal(now.Pack, loc.Pack) {
				continue
			}
		}
		return data, err
	}
}

// orphanPacks indexes the chunks in the packs of a folder the database places no
// chunk in (packs of batches whose commit it lost, or leftovers of a
// crash), by chunk ID. Packs that do not parse are skipped.
func (r *Receiver) orphanPacks(ctx context.Context, folderID, fk string) (map[string]db.SealedChunk, error) {
	used, err := r.db.SealedPackUsage(ctx, folderID)
	if err != nil {
		return nil, err
	}
	inUse := make(map[string]bool, len(used))
	for _, u := range used {
		inUse[string(u.Pack)] = true
	}
	var infos []blob.Info
	err = r.store.List(ctx, "r/"+fk+"/p/", func(info blob.Info) error {
		if id, ok := packIDOf(info.Key); ok && !inUse[string(id)] {
			infos = append(infos, info)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing packs: %w", err)
	}
	out := make(map[string]db.SealedChunk)
	for _, info := range infos {
		id, _ := packIDOf(info.Key)
		entries, err := pack.ReadIndex(ctx, r.store, info.Key, info.Size)
		if errors.Is(err, pack.ErrInvalid) {
			r.log.Warn("skipping a pack that does not parse", "folder", folderID, "key", info.Key, "err", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if _, ok := out[string(e.ID)]; !ok {
				out[string(e.ID)] = db.SealedChunk{ID: e.ID, Size: e.Length, StoredAt: info.ModTime, Pack: id, Offset: e.Offset}
			}
		}
	}
	return out, nil
}

// packIDOf returns the pack ID a pack key names.
func packIDOf(key string) ([]byte, bool) {
	name := key[bytes.LastIndexByte([]byte(key), '/')+1:]
	id, err := hex.DecodeString(name)
	return id, err == nil && len(id) == db.PackIDSize
}
