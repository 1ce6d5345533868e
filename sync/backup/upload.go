package backup

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/router"
	"lockstep/sync/sealed"
)

// Uploads: sealed records of a folder's local index go to a receiver in
// SealedIndex messages, at most sealedWindow unacknowledged, with the
// small chunks inline; the receiver asks for the others by chunk ID.

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

// upload is what a connection to a receiver has sent of one folder and not
// yet had acknowledged: the chunks the receiver may ask for, by ID.
type upload struct {
	b    *Backup
	f    Folder
	s    *share
	keys *crypt.Keys
	peer crypt.DeviceID

	mu       sync.Mutex
	active   time.Time // the receiver's last ack or chunk request
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

func (b *Backup) newUpload(f Folder, keys *crypt.Keys, peer crypt.DeviceID) *upload {
	return &upload{b: b, f: f, s: b.share(f.ID()), keys: keys, peer: peer, active: time.Now(), pending: map[crypt.ChunkID]blockRef{}, room: make(chan struct{}, 1)}
}

// waitRoom blocks until fewer than sealedWindow messages await their ack.
//
// A receiver that neither acknowledges nor asks for a chunk for ackStall
// while messages wait is reported on its peer entry (its store may be
// failing: it retries, and this side waits), until it acknowledges again.
func (u *upload) waitRoom(ctx context.Context) error {
	var tick *time.Ticker // made when the window is full, not per message
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		u.mu.Lock()
		n, idle := len(u.inflight), time.Since(u.active)
		u.mu.Unlock()
		if n < sealedWindow {
			return nil
		}
		if tick == nil {
			tick = time.NewTicker(ackStall / 4)
		}
		if idle >= ackStall {
			u.s.setStalled(u.peer, fmt.Sprintf("receiver %s has stored nothing of this device for %s: its storage may be failing (see its status)", u.peer.Short(), idle.Round(time.Second)))
		}
		select {
		case <-u.room:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// maxReceiverReason bounds the text of a receiver's reason kept for status.
const maxReceiverReason = 200

// ackStall is how long a receiver may take no step with this device's
// messages waiting before it is reported.
var ackStall = 30 * time.Second

// ack drops what the receiver has processed up to seq.
func (u *upload) ack(seq int64) {
	u.s.setStalled(u.peer, "")
	u.mu.Lock()
	u.active = time.Now()
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
	u.active = time.Now()
	ref, ok := u.pending[id]
	return ref, ok
}

// current returns the folder's keys as they are now: after a rotation
// (RotateKey, or a ring taken from a receiver) the next record or chunk is
// sealed with the new key. Chunk IDs never change with it.
func (u *upload) current() *crypt.Keys {
	if k := u.b.keys(context.Background(), u.f.ID()); k != nil {
		return k
	}
	return u.keys
}

// seal turns local records into sealed records, registering their chunks.
// cp, if not nil, goes into the last record that is not a deletion (or the
// last record): a deletion's record may go from the receiver with every
// version of its file once it expires, and its checkpoint with it.
func (u *upload) seal(recs []index.Record, pol uint64, cp *sealed.Checkpoint) ([]*protocol.SealedRecord, error) {
	return u.sealWith(u.current(), recs, pol, cp)
}

// sealWith is seal under keys, which must be the keys cp was made with.
func (u *upload) sealWith(keys *crypt.Keys, recs []index.Record, pol uint64, cp *sealed.Checkpoint) ([]*protocol.SealedRecord, error) {
	out := make([]*protocol.SealedRecord, 0, len(recs))
	carrier := len(recs) - 1
	for i := len(recs) - 1; i >= 0; i-- {
		if !recs[i].Deleted {
			carrier = i
			break
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		var rcp *sealed.Checkpoint
		if i == carrier {
			rcp = cp
		}
		sr, err := sealed.SealWith(keys, u.f.ID(), u.b.id, r, pol, rcp)
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

// checkpoint returns the checkpoint of the folder's index at sequence
// last, or nil when the index has moved past last (the pass that sends the
// rest carries one) or holds local-only records (see
// index.Set.EachAnnounced).
func (u *upload) checkpoint(keys *crypt.Keys, last int64) *sealed.Checkpoint {
	d := sealed.NewDigest(keys)
	seq, ok := u.f.Index().EachAnnounced(func(r *index.Record) {
		if !r.Deleted {
			d.Add(keys.FileKey(r.Name), uint64(r.Sequence))
		}
	})
	if !ok || seq != last {
		return nil
	}
	cp := d.Checkpoint(uint64(last), time.Now())
	return &cp
}

// sendSealed sends the local records after start to a receiver, and then
// every change, keeping at most sealedWindow messages unacknowledged.
func (u *upload) send(ctx context.Context, p *router.Peer, start int64) {
	f := u.f
	sent := start
	for {
		changed := f.IndexChanged()
		recs := f.Index().LocalSince(sent)
		pol, err := f.Polynomial(ctx)
		if err != nil {
			f.Log().Warn("chunking polynomial", "err", err)
			return
		}
		for len(recs) > 0 {
			n := min(len(recs), maxSealedRecords)
			// The pass's last message carries its checkpoint, made and
			// sealed with the same keys (a rotation may come between).
			keys := u.current()
			var cp *sealed.Checkpoint
			if n == len(recs) {
				cp = u.checkpoint(keys, recs[n-1].Sequence)
			}
			batch, err := u.sealWith(keys, recs[:n], pol, cp)
			if err != nil {
				f.Log().Error("sealing records", "err", err)
				return
			}
			// Split further if the sealed records outgrow a message. A
			// checkpoint must not arrive before the records it covers:
			// the first part is sealed again without it.
			size := 0
			for i, sr := range batch {
				size += proto.Size(sr) + 8
				if size > maxSealedMessage && i > 0 {
					batch, n = batch[:i], i
					if cp != nil {
						if batch, err = u.sealWith(keys, recs[:n], pol, nil); err != nil {
							f.Log().Error("sealing records", "err", err)
							return
						}
					}
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
			msg := &protocol.SealedIndex{Folder: f.ID(), Records: batch, Inline: u.inline(ctx, recs[:n])}
			if err := p.Conn.SealedIndex(ctx, msg); err != nil {
				if ctx.Err() == nil {
					f.Log().Debug("sending sealed index", "device", p.ID.String(), "err", err)
				}
				return
			}
			sent = last
			recs = recs[n:]
		}
		u.s.presealed.drop() // what the first pass did not take, none will
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// ServeChunk answers a receiver's request for a chunk of a record this
// node sent it: read, check against the record's hash, seal.
func (b *Backup) ServeChunk(p *router.Peer, req *protocol.Request) ([]byte, error) {
	u := b.upload(p, req.GetFolder())
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
	n := crypt.SealedChunkLen(int(ref.size))
	buf := protocol.Buffer(n)[:n]
	body, err := u.sealedBody(ref, buf[:0])
	if err != nil || len(body) > int(req.GetSize()) {
		protocol.Recycle(buf)
		return nil, cmp.Or(err, protocol.ErrInvalidFile)
	}
	if &body[0] != &buf[0] {
		protocol.Recycle(buf) // sealed elsewhere after all: not ours to keep
	}
	return body, nil
}

// sealedBody reads the block ref names, checks it against its hash (the
// file may have changed since it was scanned) and seals it, into dst's
// backing array when it has room.
func (u *upload) sealedBody(ref blockRef, dst []byte) ([]byte, error) {
	plain, err := u.f.ReadBlock(ref.name, ref.offset, ref.size)
	if err != nil {
		return nil, err
	}
	defer protocol.Recycle(plain)
	if chunk.HashOf(plain) != ref.hash {
		return nil, protocol.ErrInvalidFile
	}
	_, body, err := u.current().SealChunkTo(dst, plain, ref.hash, !u.b.opts.NoCompression)
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
			id := u.keys.ChunkID(b.Hash) // the same under every generation
			if b.Size > inlineChunk || seen[id] {
				continue
			}
			body := u.s.presealed.take(id)
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

// SealedAck handles a receiver's acknowledgement of our records, or its
// word that it cannot store them (shown on its peer entry until it
// acknowledges again).
func (b *Backup) SealedAck(p *router.Peer, ack *protocol.SealedAck) {
	u := b.upload(p, ack.GetFolder())
	if u == nil {
		return
	}
	if reason := ack.GetError(); reason != "" {
		if len(reason) > maxReceiverReason {
			reason = reason[:maxReceiverReason] + "…"
		}
		u.s.setStalled(u.peer, fmt.Sprintf("receiver %s cannot store this device's records: %s", u.peer.Short(), strings.ToValidUTF8(reason, "?")))
		return
	}
	u.ack(ack.GetSequence())
}
