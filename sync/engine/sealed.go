package engine

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"google.golang.org/protobuf/proto"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/sealed"
)

// The trusted side of an encrypted share. A folder shared with an untrusted
// receiver sends it sealed records of its local index (counter = local
// sequence) and serves the sealed chunks the receiver asks for; the
// receiver's record log comes back as SealedIndex messages, which are
// opened, checked and kept as the receiver's index (so the receiver counts
// as a device that has files, and the puller fetches from it).

// Sealing limits.
const (
	// maxSealedMessage bounds one SealedIndex's records.
	maxSealedMessage = 4 << 20
	// maxSealedRecords bounds the records of one SealedIndex, so a
	// receiver fetches the chunks of one message in a reasonable batch.
	maxSealedRecords = 2000
	// sealedWindow is how many SealedIndex messages may await their ack.
	sealedWindow = 4
	// Chunks of at most inlineChunk bytes (small files, file tails) are
	// sent along with their records, up to inlineBytes a message, instead
	// of costing the receiver a request each; a receiver that holds one
	// already drops it.
	inlineChunk = 64 << 10
	inlineBytes = 8 << 20
)

// Settings keys of encrypted shares.
func folderKeySetting(folderID string) string { return "folder-key/" + folderID }
func logCursorSetting(folderID string, dev crypt.DeviceID) string {
	return "receiver-log/" + folderID + "/" + dev.String()
}

// heldSetting is the highest counter of this device's own records that a
// receiver has served back in its log: it has them, for certain.
func heldSetting(folderID string, dev crypt.DeviceID) string {
	return "receiver-held/" + folderID + "/" + dev.String()
}

// ErrRollback means a receiver served an older state than this node has
// already seen from it.
var ErrRollback = errors.New("receiver rolled back")

// keys returns the folder's derived keys, or nil if the folder has no key
// (it was never shared with a receiver).
func (f *folder) keys(ctx context.Context) *crypt.Keys {
	f.keysMu.Lock()
	defer f.keysMu.Unlock()
	if f.keysCache != nil {
		return f.keysCache
	}
	s, err := f.e.db.Setting(ctx, folderKeySetting(f.id))
	if err != nil {
		if !errors.Is(err, db.ErrNotFound) {
			f.log.Warn("reading folder key", "err", err)
		}
		return nil
	}
	var k crypt.FolderKey
	if b, err := hex.DecodeString(s); err != nil || len(b) != len(k) {
		f.log.Error("stored folder key is damaged")
		return nil
	} else {
		copy(k[:], b)
	}
	keys, err := crypt.DeriveKeys(k)
	if err != nil {
		f.log.Error("deriving folder keys", "err", err)
		return nil
	}
	f.keysCache = keys
	return keys
}

// untrusted reports whether dev is a receiver of this folder: it shares
// the folder and is marked untrusted.
func (f *folder) untrusted(dev crypt.DeviceID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.receivers[dev]
}

// upload is what a connection to a receiver has sent of one folder and not
// yet had acknowledged: the chunks the receiver may ask for, by ID.
type upload struct {
	f    *folder
	keys *crypt.Keys
	peer crypt.DeviceID

	mu       sync.Mutex
	pending  map[crypt.ChunkID]blockRef
	inflight []int64 // last sequence of each unacknowledged message
	room     chan struct{}
}

// blockRef is where the plaintext of a sealed chunk is.
type blockRef struct {
	name   string
	offset int64
	size   uint32
	hash   chunk.Hash
	seq    int64 // the latest record that references it
}

func newUpload(f *folder, keys *crypt.Keys, peer crypt.DeviceID) *upload {
	return &upload{f: f, keys: keys, peer: peer, pending: map[crypt.ChunkID]blockRef{}, room: make(chan struct{}, 1)}
}

// waitRoom blocks until fewer than sealedWindow messages await their ack.
func (u *upload) waitRoom(ctx context.Context) error {
	for {
		u.mu.Lock()
		n := len(u.inflight)
		u.mu.Unlock()
		if n < sealedWindow {
			return nil
		}
		select {
		case <-u.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ack drops what the receiver has processed up to seq.
func (u *upload) ack(seq int64) {
	u.mu.Lock()
	i := 0
	for i < len(u.inflight) && u.inflight[i] <= seq {
		i++
	}
	u.inflight = u.inflight[i:]
	for id, ref := range u.pending {
		if ref.seq <= seq {
			delete(u.pending, id)
		}
	}
	u.mu.Unlock()
	select {
	case u.room <- struct{}{}:
	default:
	}
}

func (u *upload) lookup(id crypt.ChunkID) (blockRef, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	ref, ok := u.pending[id]
	return ref, ok
}

// seal turns local records into sealed records, registering their chunks.
func (u *upload) seal(recs []index.Record, pol uint64) ([]*protocol.SealedRecord, error) {
	out := make([]*protocol.SealedRecord, 0, len(recs))
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		sr, err := sealed.Seal(u.keys, u.f.id, u.f.e.id, r, pol)
		if err != nil {
			return nil, err
		}
		for j, b := range r.Blocks {
			if j < len(sr.Chunks) {
				u.pending[crypt.ChunkID(sr.Chunks[j])] = blockRef{name: r.Name, offset: b.Offset, size: b.Size, hash: b.Hash, seq: r.Sequence}
			}
		}
		out = append(out, sr)
	}
	return out, nil
}

// sendSealed sends the local records after start to a receiver, and then
// every change, keeping at most sealedWindow messages unacknowledged.
func (pc *peerConn) sendSealed(ctx context.Context, u *upload, start int64) {
	f := u.f
	sent := start
	for {
		changed := f.indexChanged()
		recs := f.set.LocalSince(sent)
		pol, err := f.polynomial(ctx)
		if err != nil {
			f.log.Warn("chunking polynomial", "err", err)
			return
		}
		for len(recs) > 0 {
			n := min(len(recs), maxSealedRecords)
			batch, err := u.seal(recs[:n], uint64(pol))
			if err != nil {
				f.log.Error("sealing records", "err", err)
				return
			}
			// Split further if the sealed records outgrow a message.
			size := 0
			for i, sr := range batch {
				size += proto.Size(sr) + 8
				if size > maxSealedMessage && i > 0 {
					batch, n = batch[:i], i
					break
				}
			}
			if err := u.waitRoom(ctx); err != nil {
				return
			}
			last := recs[n-1].Sequence
			u.mu.Lock()
			u.inflight = append(u.inflight, last)
			u.mu.Unlock()
			msg := &protocol.SealedIndex{Folder: f.id, Records: batch, Inline: u.inline(ctx, recs[:n])}
			if err := pc.conn.SealedIndex(ctx, msg); err != nil {
				if ctx.Err() == nil {
					f.log.Debug("sending sealed index", "device", pc.id.String(), "err", err)
				}
				return
			}
			sent = last
			recs = recs[n:]
		}
		f.presealed.drop() // what the first pass did not take, none will
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// serveSealedChunk answers a receiver's request for a chunk of a record
// this node sent it: read, check against the record's hash, seal.
func (pc *peerConn) serveSealedChunk(req *protocol.Request) ([]byte, error) {
	pc.mu.Lock()
	u := pc.uploads[req.GetFolder()]
	pc.mu.Unlock()
	if u == nil {
		return nil, protocol.ErrNoSuchFile
	}
	ref, ok := u.lookup(crypt.ChunkID(req.GetChunkId()))
	if !ok {
		return nil, protocol.ErrNoSuchFile
	}
	if ref.size == 0 || ref.size > chunk.MaxSize {
		return nil, protocol.ErrInvalidFile
	}
	// Into a pooled buffer, given back by Release once the frame is sent:
	// fresh memory for every chunk made page faults the largest cost.
	buf := getBlock(crypt.SealedChunkLen(int(ref.size)))
	body, err := u.sealedBody(ref, buf[:0])
	if err != nil || len(body) > int(req.GetSize()) {
		putBlock(buf)
		return nil, cmp.Or(err, protocol.ErrInvalidFile)
	}
	if &body[0] != &buf[0] {
		putBlock(buf) // sealed elsewhere after all: not ours to keep
	}
	return body, nil
}

// sealedBody reads the block ref names, checks it against its hash (the
// file may have changed since it was scanned) and seals it, into dst's
// backing array when it has room.
func (u *upload) sealedBody(ref blockRef, dst []byte) ([]byte, error) {
	plain, err := u.f.readBlock(&protocol.Request{Name: ref.name, Offset: ref.offset, Size: ref.size})
	if err != nil {
		return nil, err
	}
	defer putBlock(plain)
	if chunk.HashOf(plain) != ref.hash {
		return nil, protocol.ErrInvalidFile
	}
	_, body, err := u.keys.SealChunkTo(dst, plain, ref.hash, true)
	return body, err
}

// inline seals the small chunks of recs to send along with them, each
// once, up to inlineBytes. A chunk that cannot be read as it was scanned
// is left out; the receiver requests it and hears why.
func (u *upload) inline(ctx context.Context, recs []index.Record) []*protocol.InlineChunk {
	var out []*protocol.InlineChunk
	seen := make(map[crypt.ChunkID]bool)
	total := 0
	for i := range recs {
		r := &recs[i]
		if r.Deleted || r.Type != index.File {
			continue
		}
		if ctx.Err() != nil {
			return out
		}
		for _, b := range r.Blocks {
			id := u.keys.ChunkID(b.Hash)
			if b.Size > inlineChunk || seen[id] {
				continue
			}
			body := u.f.presealed.take(id)
			if body == nil {
				var err error
				body, err = u.sealedBody(blockRef{name: r.Name, offset: b.Offset, size: b.Size, hash: b.Hash}, nil)
				if err != nil {
					continue // a later copy of it may still be readable
				}
			}
			seen[id] = true
			if total+len(body) > inlineBytes {
				return out
			}
			total += len(body)
			out = append(out, &protocol.InlineChunk{Id: id[:], Body: body})
		}
	}
	return out
}

// sealedAck handles a receiver's acknowledgement of our records.
func (pc *peerConn) sealedAck(ack *protocol.SealedAck) {
	pc.mu.Lock()
	u := pc.uploads[ack.GetFolder()]
	pc.mu.Unlock()
	if u == nil {
		return
	}
	u.ack(ack.GetSequence())
}

// settingInt reads an integer setting, 0 when missing or unreadable.
func (e *Engine) settingInt(ctx context.Context, key string) int64 {
	s, err := e.db.Setting(ctx, key)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// sealedIndexFrom takes a receiver's record log: every record is opened
// and checked, then kept as the receiver's record of its file when it is
// newer than what the receiver was known to have. Records that fail to
// open are counted and reported, never used.
func (f *folder) sealedIndexFrom(ctx context.Context, peer crypt.DeviceID, idx *protocol.SealedIndex) error {
	keys := f.keys(ctx)
	if keys == nil {
		return fmt.Errorf("folder %s has no key for receiver records", f.id)
	}
	best := map[string]index.Record{}
	var last, own, ownAt int64
	seen := map[crypt.DeviceID]uint64{} // highest counter per origin
	for _, sr := range idx.GetRecords() {
		last = max(last, sr.GetSequence())
		r, err := sealed.Open(keys, f.id, sr)
		if err != nil {
			f.tamperedRecords.Add(1)
			f.setReceiverError(peer, fmt.Errorf("a record from receiver %s failed verification (tampered or damaged): %w", peer.Short(), err))
			f.log.Warn("receiver sent a bad record", "device", peer.String(), "err", err)
			continue
		}
		origin := crypt.DeviceID(sr.GetOrigin())
		seen[origin] = max(seen[origin], sr.GetCounter())
		if origin == f.e.id && r.Sequence > own {
			own, ownAt = r.Sequence, sr.GetSequence()
		}
		r.Sequence = sr.GetSequence()
		cur, ok := best[r.Name]
		if !ok {
			cur, ok = f.set.Remote(peer, r.Name)
		}
		if ok && !r.Wins(&cur) {
			continue
		}
		best[r.Name] = r
	}
	recs := make([]index.Record, 0, len(best))
	for _, r := range best {
		recs = append(recs, r)
	}
	if err := f.set.UpdateRemote(ctx, peer, recs); err != nil {
		return fmt.Errorf("storing receiver records of %s: %w", f.id, err)
	}
	// Written in this order for fork checks (fork.go): the counters seen
	// before the cursor passes them, and where the held record is before
	// its counter.
	if err := f.raiseOrigins(ctx, peer, seen, nil); err != nil {
		return err
	}
	if last > f.e.settingInt(ctx, logCursorSetting(f.id, peer)) {
		if err := f.e.db.SetSetting(ctx, logCursorSetting(f.id, peer), strconv.FormatInt(last, 10)); err != nil {
			return err
		}
	}
	if own > 0 && own > f.e.settingInt(ctx, heldSetting(f.id, peer)) {
		if err := f.e.setHeldAt(ctx, f.id, peer, ownAt); err != nil {
			return err
		}
		if err := f.e.db.SetSetting(ctx, heldSetting(f.id, peer), strconv.FormatInt(own, 10)); err != nil {
			return err
		}
		f.e.claims.notify()
	}
	f.checkClaims(ctx, peer)
	if len(recs) > 0 {
		f.requestPull()
	}
	return nil
}

// requestSealed fetches a block from a receiver by its chunk ID and opens
// it, which checks its plaintext against the block's hash.
func (f *folder) requestSealed(ctx context.Context, peer crypt.DeviceID, b index.Block) ([]byte, error) {
	keys := f.keys(ctx)
	if keys == nil {
		return nil, errors.New("no folder key")
	}
	id := keys.ChunkID(b.Hash)
	body, err := f.e.request(ctx, peer, &protocol.Request{
		Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: f.id, ChunkId: id[:], Size: uint32(crypt.MaxSealedChunkSize),
	})
	if err != nil {
		return nil, err
	}
	plain, err := keys.OpenBlockTo(nil, b.Hash, body)
	protocol.Recycle(body)
	if err != nil {
		f.tamperedChunks.Add(1)
		f.setReceiverError(peer, fmt.Errorf("a chunk from receiver %s failed verification (tampered or damaged): %w", peer.Short(), err))
		f.log.Warn("receiver sent a bad chunk", "device", peer.String(), "err", err)
		return nil, err
	}
	return plain, nil
}

// setReceiverError records the latest problem with a receiver for status.
func (f *folder) setReceiverError(peer crypt.DeviceID, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.recvErrs, peer)
		return
	}
	f.recvErrs[peer] = err.Error()
}

// reconcileReceiver acts on a receiver's ClusterConfig entry for f: it
// checks the receiver did not roll back, and starts sending it records.
// The rollback checks need a fresh entry: one applied again after a
// configuration change is as old as the connection, and the receiver has
// served more since.
func (pc *peerConn) reconcileReceiver(f *folder, wf *protocol.Folder, fresh bool) error {
	e, peer, ctx := pc.e, pc.id, pc.ctx
	keys := f.keys(ctx)
	if keys == nil {
		f.setReceiverError(peer, fmt.Errorf("receiver %s shares the folder, but this device has no key for it: share it again with the password", peer.Short()))
		return nil
	}
	var mine, theirs *protocol.FolderDevice
	for _, d := range wf.GetDevices() {
		switch string(d.GetDeviceId()) {
		case string(e.id[:]):
			mine = d
		case string(peer[:]):
			theirs = d
		}
	}
	if theirs != nil && theirs.GetIndexId() != 0 {
		known := e.peerIndexID(ctx, f.id, peer)
		if known == theirs.GetIndexId() {
			if seen := e.settingInt(ctx, logCursorSetting(f.id, peer)); fresh && theirs.GetMaxSequence() < seen {
				err := fmt.Errorf("%w: receiver %s serves its log up to %d, but this device has already seen it up to %d; refusing it", ErrRollback, peer.Short(), theirs.GetMaxSequence(), seen)
				f.setReceiverError(peer, err)
				return err
			}
		} else if err := f.noteReceiverLog(ctx, peer, known, theirs.GetIndexId()); err != nil {
			return err
		}
	}
	held := int64(mine.GetMaxSequence())
	if served := e.settingInt(ctx, heldSetting(f.id, peer)); fresh && held < served {
		err := fmt.Errorf("%w: receiver %s says it holds this device's records up to %d, but it has served them up to %d; refusing it", ErrRollback, peer.Short(), held, served)
		f.setReceiverError(peer, err)
		return err
	}
	if held > f.set.LocalSequence() {
		// The receiver holds records of an earlier database of this device:
		// number ours past them, or it would take them for copies.
		f.log.Info("receiver holds newer records of this device than its index; renumbering", "device", peer.String(), "held", held)
		if err := f.set.Renumber(ctx, held); err != nil {
			return err
		}
	}
	if theirs != nil && theirs.GetIndexId() != 0 {
		// The receiver's high-water mark per origin, for fork checks.
		marks := map[crypt.DeviceID]uint64{}
		for _, d := range wf.GetDevices() {
			if id := crypt.DeviceID(d.GetDeviceId()); id != peer && d.GetMaxSequence() > 0 {
				marks[id] = max(marks[id], uint64(d.GetMaxSequence()))
			}
		}
		if err := f.raiseOrigins(ctx, peer, nil, marks); err != nil {
			return err
		}
		f.checkClaims(ctx, peer)
	}
	f.setReceiverError(peer, nil)
	pc.startUpload(f, keys, held)
	return nil
}

// startUpload starts sending f's sealed records to the receiver from
// start, unless that runs already.
func (pc *peerConn) startUpload(f *folder, keys *crypt.Keys, start int64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if s, ok := pc.senders[f.id]; ok {
		if s.f == f {
			return
		}
		s.stop()
	}
	ctx, stop := context.WithCancel(pc.ctx)
	u := newUpload(f, keys, pc.id)
	pc.senders[f.id] = sender{f: f, stop: stop}
	pc.uploads[f.id] = u
	pc.wg.Go(func() {
		// Requests can't be made from the reader goroutine reconcile runs
		// on, so a pending envelope is settled here.
		if pc.settleEnvelope(ctx, f) {
			pc.sendSealed(ctx, u, start)
		}
	})
}

// noteReceiverLog records the ID of the log receiver peer serves (known is
// the one recorded before, id the one announced). A log that started over
// replaces everything this device knew of the old one; when none was
// known, what the receiver already sent is of this log and stays (its
// log can arrive before the first reconcile, as a trusted peer's index
// can: see notePeerIndex).
func (f *folder) noteReceiverLog(ctx context.Context, peer crypt.DeviceID, known, id uint64) error {
	e := f.e
	if known != 0 {
		f.log.Info("receiver's log started over; fetching it again", "device", peer.String())
		if err := f.set.DropRemote(ctx, peer); err != nil {
			return err
		}
		for _, key := range []string{logCursorSetting(f.id, peer), heldSetting(f.id, peer)} {
			if err := e.db.DeleteSetting(ctx, key); err != nil && !errors.Is(err, db.ErrNotFound) {
				return err
			}
		}
		if err := f.forgetReceiverLog(ctx, peer); err != nil {
			return err
		}
	}
	return e.setPeerIndexID(ctx, f.id, peer, id)
}
