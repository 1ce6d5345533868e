package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/sync/protocol"
)

// ingest stores the SealedIndex messages queued for l, in order, until
// l's context ends or one fails for a reason of the peer's (a request it
// failed, its connection); then it stops the whole link. A failure of
// this node's own (store, database) is retried (ingestRetrying).
func (r *Receiver) ingest(l *link) {
	defer l.cancel()
	defer l.folder.setFailure(l, nil)
	for {
		select {
		case idx := <-l.queue:
			if err := r.ingestRetrying(l, idx); err != nil {
				if l.ctx.Err() == nil {
					r.log.Warn("storing sealed records", "folder", l.folder.id,
						"device", crypt.DeviceID(l.p.Peer()), "err", err)
				}
				return
			}
		case <-l.ctx.Done():
			return
		}
	}
}

// Retries of an ingest that failed for a reason of this node's own: after
// retryFirst, doubling up to retryMax, each wait drawn between half the
// delay and the delay.
const (
	retryFirst = time.Second
	retryMax   = time.Minute
)

// ErrCannotStore is matched by the error Status returns while an ingest
// of the folder cannot store what a peer sends.
var ErrCannotStore = errors.New("cannot store")

// StoreError is why an ingest cannot store what a peer sends: this
// node's store or database fails (a full disk, a bucket out of reach).
// The ingest keeps the message unacknowledged, so the peer holds back
// (it keeps at most a few unacknowledged) and still serves the chunks
// its records need, and tries it again until it is stored or the
// connection ends. It matches ErrCannotStore and the failure.
type StoreError struct {
	Device crypt.DeviceID // the peer whose records wait
	Since  time.Time      // the first failure in a row
	Err    error          // the latest failure
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("cannot store what %v sends (failing since %s, retrying): %v",
		e.Device.Short(), e.Since.UTC().Format(time.RFC3339), e.Err)
}

func (e *StoreError) Unwrap() []error { return []error{ErrCannotStore, e.Err} }

// peerError is an ingest's failure that is the peer's doing (a chunk
// request it failed, its connection): retrying on the same link would
// not help.
type peerError struct{ err error }

func (e *peerError) Error() string { return e.err.Error() }
func (e *peerError) Unwrap() error { return e.err }

// ingestRetrying stores idx (ingestOne). While that fails for a reason
// of this node's own it keeps idx, shows the failure in the folder's
// status and tries again after a backoff; it returns nil once idx is
// stored and acknowledged, or the error of the peer's or of l's context
// that ended it.
func (r *Receiver) ingestRetrying(l *link, idx *protocol.SealedIndex) error {
	var delay time.Duration
	for {
		err := r.ingestOne(l.ctx, l, idx)
		var pe *peerError
		if err == nil || l.ctx.Err() != nil || errors.As(err, &pe) {
			if _, ended := l.folder.setFailure(l, nil); err == nil && ended {
				r.log.Info("storing sealed records again", "folder", l.folder.id, "device", crypt.DeviceID(l.p.Peer()))
			}
			return err
		}
		delay = nextDelay(delay)
		se, started := l.folder.setFailure(l, err)
		if started {
			r.log.Warn("cannot store sealed records; retrying", "folder", l.folder.id,
				"device", crypt.DeviceID(l.p.Peer()), "err", err)
			r.events.Publish(events.FolderError{Folder: l.folder.id, Error: se.Error()})
			// The peer waits for the ack; tell it why it does not come,
			// acknowledging again only what was acknowledged.
			if aerr := l.p.SealedAck(l.ctx, &protocol.SealedAck{Folder: l.folder.id, Sequence: l.acked, Error: err.Error()}); aerr != nil && l.ctx.Err() == nil {
				r.log.Debug("telling the peer why nothing is stored", "folder", l.folder.id, "err", aerr)
			}
		} else {
			r.log.Debug("cannot store sealed records; retrying", "folder", l.folder.id,
				"device", crypt.DeviceID(l.p.Peer()), "in", delay, "err", err)
		}
		t := time.NewTimer(jitter(delay))
		select {
		case <-t.C:
		case <-l.ctx.Done():
			t.Stop()
			return l.ctx.Err()
		}
	}
}

// setFailure records that l's ingest fails with err, or that it works
// (err nil). It returns the failure as Status shows it, and whether l's
// ingest started failing (or, with err nil, stopped).
func (f *folder) setFailure(l *link, err error) (*StoreError, bool) {
	f.failMu.Lock()
	defer f.failMu.Unlock()
	old, had := f.failing[l]
	if err == nil {
		delete(f.failing, l)
		return &old, had
	}
	if !had {
		old = StoreError{Device: crypt.DeviceID(l.p.Peer()), Since: time.Now()}
	}
	old.Err = err
	if f.failing == nil {
		f.failing = make(map[*link]StoreError)
	}
	f.failing[l] = old
	return &old, !had
}

// failure returns the oldest failure of the folder's ingests going on,
// or nil.
func (f *folder) failure() *StoreError {
	f.failMu.Lock()
	defer f.failMu.Unlock()
	var oldest *StoreError
	for _, se := range f.failing {
		if oldest == nil || se.Since.Before(oldest.Since) {
			oldest = &se
		}
	}
	return oldest
}

// nextDelay returns the backoff after delay: retryFirst, then doubling
// up to retryMax.
func nextDelay(delay time.Duration) time.Duration {
	if delay <= 0 {
		return retryFirst
	}
	return min(2*delay, retryMax)
}

// jitter returns a wait between half of delay and delay, so that
// ingests failing together do not retry together.
func jitter(delay time.Duration) time.Duration {
	return delay/2 + rand.N(delay/2+1)
}

// errCollected means a prune deleted chunks between an ingest's choice of
// chunks to fetch and its commit.
var errCollected = errors.New("chunks collected meanwhile")

// maxIngestTries bounds how often ingestOne starts over after a prune.
const maxIngestTries = 4

// ingestOne stores the records of idx that are new, fetching the chunks
// they need from the peer, and acknowledges idx. If a prune collected
// chunks meanwhile it starts over, since one it chose not to fetch may be
// gone.
func (r *Receiver) ingestOne(ctx context.Context, l *link, idx *protocol.SealedIndex) error {
	recs := idx.GetRecords()
	if len(recs) == 0 {
		return nil
	}
	inline := make(map[string][]byte, len(idx.GetInline()))
	for _, c := range idx.GetInline() {
		inline[string(c.GetId())] = c.GetBody()
	}
	var err error
	for range maxIngestTries {
		if err = r.storeNew(ctx, l, recs, inline); !errors.Is(err, errCollected) {
			break
		}
	}
	if err != nil {
		return err
	}
	if err := l.p.SealedAck(ctx, &protocol.SealedAck{Folder: l.folder.id, Sequence: recs[len(recs)-1].GetSequence()}); err != nil {
		return &peerError{fmt.Errorf("acknowledging: %w", err)}
	}
	l.acked = recs[len(recs)-1].GetSequence()
	return nil
}

// storeNew stores the records of recs that are new, taking the chunks
// they need from inline (bodies by chunk ID that came with them) or else
// fetching them from the peer.
func (r *Receiver) storeNew(ctx context.Context, l *link, recs []*protocol.SealedRecord, inline map[string][]byte) error {
	f := l.folder
	epoch := f.collected.Load()
	keep, err := r.fresh(ctx, f, recs)
	if err != nil {
		return err
	}

	// The chunks the new records need that the folder lacks, once each.
	var wanted [][]byte
	seen := make(map[string]bool)
	for _, w := range keep {
		for _, c := range w.GetChunks() {
			if !seen[string(c)] {
				seen[string(c)] = true
				wanted = append(wanted, c)
			}
		}
	}
	held, err := r.db.SealedChunksHeld(ctx, f.id, wanted)
	if err != nil {
		return err
	}
	missing := slices.DeleteFunc(wanted, func(c []byte) bool { return held[string(c)] })
	start := time.Now()
	// The packs of this fetch are safe from a prune until it committed.
	packs := &packer{store: r.store, f: f, target: int(r.packTarget.Load()), bufs: r.packBufs, uploads: r.packUploads}
	defer packs.release()
	fetched, bad, err := r.fetch(ctx, l.p, f, packs, missing, inline)
	if err != nil {
		return err
	}
	fetchTime := time.Since(start)
	if len(bad) > 0 {
		keep = slices.DeleteFunc(keep, func(w *protocol.SealedRecord) bool {
			for _, c := range w.GetChunks() {
				if bad[string(c)] {
					return true
				}
			}
			return false
		})
	}
	if len(keep) > 0 {
		if err := r.commit(ctx, f, keep, fetched, epoch); err != nil {
			return err
		}
	}
	l.records += int64(len(keep))
	l.chunks += int64(len(fetched))
	for _, c := range fetched {
		l.bytes += c.Size
	}
	r.events.Publish(events.ReceiverProgress{Folder: f.id, Device: crypt.DeviceID(l.p.Peer()).String(), Records: l.records, Chunks: l.chunks, Bytes: l.bytes})
	r.log.Debug("stored sealed records", "folder", f.id, "records", len(keep), "chunks", len(fetched),
		"fetch", fetchTime.Round(time.Millisecond), "commit", (time.Since(start) - fetchTime).Round(time.Millisecond))
	return nil
}

// fresh returns the records of recs the folder does not hold yet and can
// store, each (origin, counter) once. A record at or below its origin's
// high-water mark that is not held was pruned: it is not taken back.
func (r *Receiver) fresh(ctx context.Context, f *folder, recs []*protocol.SealedRecord) ([]*protocol.SealedRecord, error) {
	type originCounter struct {
		origin  string
		counter uint64
	}
	hw, err := r.db.ReceiverHighWater(ctx, f.id)
	if err != nil {
		return nil, err
	}
	pruned := make(map[string]uint64, len(hw.Counters))
	for _, c := range hw.Counters {
		pruned[string(c.Origin)] = c.Counter
	}
	// Which of them the folder holds, asked per origin.
	counters := make(map[string][]uint64)
	var valid []*protocol.SealedRecord
	for i, w := range recs {
		if err := checkRecord(w); err != nil {
			r.log.Debug("skipping a sealed record", "folder", f.id, "record", i, "err", err)
			continue
		}
		valid = append(valid, w)
		counters[string(w.GetOrigin())] = append(counters[string(w.GetOrigin())], w.GetCounter())
	}
	held := make(map[string]map[uint64]bool, len(counters))
	for o, cs := range counters {
		h, err := r.db.SealedCountersHeld(ctx, f.id, []byte(o), cs)
		if err != nil {
			return nil, err
		}
		held[o] = h
	}
	seen := make(map[originCounter]bool)
	var keep []*protocol.SealedRecord
	for _, w := range valid {
		k := originCounter{string(w.GetOrigin()), w.GetCounter()}
		if seen[k] {
			continue
		}
		seen[k] = true
		if mark, ok := pruned[k.origin]; !held[k.origin][k.counter] && (!ok || k.counter > mark) {
			keep = append(keep, w)
		}
	}
	return keep, nil
}

// fetch stores the chunks ids durably, those in inline as they are and
// the others requested from p, fetchParallel at a time: those shorter
// than the receiver's pack threshold in new packs of packs, the others as
// blobs of their own. It returns where each chunk stored is and the set of
// those p could not deliver (or delivered with an impossible size). Any
// other failure is an error, after which nothing more is stored.
func (r *Receiver) fetch(ctx context.Context, p Peer, f *folder, packs *packer, ids [][]byte, inline map[string][]byte) (map[string]db.SealedChunk, map[string]bool, error) {
	stored := make(map[string]db.SealedChunk, len(ids))
	bad := make(map[string]bool)
	if len(ids) == 0 {
		return stored, bad, nil
	}
	batcher, _ := r.store.(blob.Batcher)
	packBelow := int(r.packBelow.Load())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	// store keeps one chunk's body durably (once the batch is synced) and
	// notes where.
	store := func(id, data []byte) error {
		loc := db.SealedChunk{ID: id, Size: int64(len(data))}
		var err error
		if len(data) < packBelow {
			loc, err = packs.add(ctx, id, data)
		} else if batcher != nil {
			err = batcher.PutUnsynced(ctx, chunkKey(f.fk, id), bytes.NewReader(data), int64(len(data)))
		} else {
			err = r.store.Put(ctx, chunkKey(f.fk, id), bytes.NewReader(data), int64(len(data)))
		}
		if err != nil {
			return fmt.Errorf("storing chunk %x: %w", id, err)
		}
		mu.Lock()
		stored[string(id)] = loc
		mu.Unlock()
		return nil
	}
	sem := make(chan struct{}, fetchParallel)
loop:
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		if data, ok := inline[string(id)]; ok && len(data) <= crypt.MaxSealedChunkSize {
			if err := store(id, data); err != nil {
				fail(err)
				break
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break loop
		}
		wg.Go(func() {
			defer func() { <-sem }()
			data, err := p.Request(ctx, &protocol.Request{
				Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: f.id,
				ChunkId: id, Size: uint32(crypt.MaxSealedChunkSize)})
			switch {
			case errors.Is(err, protocol.ErrNoSuchFile), errors.Is(err, protocol.ErrInvalidFile):
				mu.Lock()
				bad[string(id)] = true
				mu.Unlock()
				return
			case err != nil:
				fail(&peerError{fmt.Errorf("fetching chunk %x: %w", id, err)})
				return
			case len(data) == 0 || len(data) > crypt.MaxSealedChunkSize:
				r.log.Debug("peer sent a chunk of impossible size", "folder", f.id, "chunk", fmt.Sprintf("%x", id), "size", len(data))
				mu.Lock()
				bad[string(id)] = true
				mu.Unlock()
				return
			}
			err = store(id, data)
			protocol.Recycle(data)
			if err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := packs.flush(ctx); err != nil {
		return nil, nil, err
	}
	if batcher != nil && len(stored) > 0 {
		if err := batcher.Sync(ctx); err != nil {
			return nil, nil, fmt.Errorf("syncing chunks: %w", err)
		}
	}
	return stored, bad, nil
}

// commit appends the records of keep the folder still lacks to its log:
// log sequences, the log object in the store, then one transaction with
// the records and the chunks of fetched they reference. It fails with
// errCollected if a prune collected chunks since f.collected was epoch.
func (r *Receiver) commit(ctx context.Context, f *folder, keep []*protocol.SealedRecord, fetched map[string]db.SealedChunk, epoch uint64) error {
	f.append.Lock()
	defer f.append.Unlock()
	if f.collected.Load() != epoch {
		return errCollected
	}
	// Another connection may have stored some meanwhile.
	keep, err := r.fresh(ctx, f, keep)
	if err != nil || len(keep) == 0 {
		return err
	}
	seq, err := r.db.ReceiverLastSequence(ctx, f.id)
	if err != nil {
		return err
	}
	now := time.Now()
	recs := make([]db.SealedRecord, len(keep))
	var chunks []db.SealedChunk
	added := make(map[string]bool)
	for i, w := range keep {
		stored := now
		if ns := w.GetStoredNs(); ns != 0 {
			stored = time.Unix(0, ns)
		}
		recs[i] = fromWire(w, seq+1+int64(i), stored)
		for _, c := range w.GetChunks() {
			if loc, ok := fetched[string(c)]; ok && !added[string(c)] {
				added[string(c)] = true
				loc.StoredAt = now
				chunks = append(chunks, loc)
			}
		}
	}
	logObj, err := proto.Marshal(&protocol.SealedIndex{Folder: logFolder(f.fk, f.id), Records: toWire(recs)})
	if err != nil {
		return fmt.Errorf("encoding log object: %w", err)
	}
	if err := r.store.Put(ctx, logKey(f.fk, seq+1), bytes.NewReader(logObj), int64(len(logObj))); err != nil {
		return fmt.Errorf("writing log object: %w", err)
	}
	if err := r.db.AppendSealed(ctx, f.id, recs, chunks); err != nil {
		return err
	}
	r.appended(f)
	return nil
}
