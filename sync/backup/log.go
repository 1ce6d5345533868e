package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/router"
	"lockstep/sync/sealed"
)

// The receiver's side of the conversation: its cluster config entry says
// how far its log goes and how much of this device's records it holds;
// its log comes back as SealedIndex messages.

// ErrRollback means a receiver served an older state than this node has
// already seen from it.
var ErrRollback = errors.New("receiver rolled back")

// ClusterFolders lists the folders shared with peer as a receiver: no
// polynomial, and the receiver's entry carries how much of its log this
// node has seen.
func (b *Backup) ClusterFolders(ctx context.Context, peer crypt.DeviceID) []*protocol.Folder {
	var out []*protocol.Folder
	b.folders.Each(func(f Folder) {
		if shared, untrusted := f.SharedWith(peer); !shared || !untrusted {
			return
		}
		wf, err := f.Entry(ctx)
		if err != nil {
			f.Log().Warn("folder's cluster config entry", "err", err)
			return
		}
		wf.Polynomial, wf.PolynomialFixed = 0, false
		wf.Devices = append(wf.Devices, &protocol.FolderDevice{
			DeviceId: peer[:], MaxSequence: b.view(ctx, f.ID(), peer).Cursor,
			IndexId: b.logID(ctx, f.ID(), peer), Encrypted: true,
		})
		out = append(out, wf)
	})
	return out
}

// SealedIndex takes a receiver's record log: every record is opened and
// checked, then kept as the receiver's record of its file when it is
// newer than what the receiver was known to have, and the message is
// acknowledged. Records that fail to open are counted and reported, never
// used.
func (b *Backup) SealedIndex(p *router.Peer, idx *protocol.SealedIndex) error {
	f := b.folders.Folder(idx.GetFolder())
	if f == nil {
		return nil
	}
	if err := b.sealedIndex(p.Context(), f, p.ID, idx); err != nil {
		return err
	}
	if n := len(idx.GetRecords()); n > 0 {
		return p.Conn.SealedAck(p.Context(), &protocol.SealedAck{Folder: f.ID(), Sequence: idx.GetRecords()[n-1].GetSequence()})
	}
	return nil
}

func (b *Backup) sealedIndex(ctx context.Context, f Folder, peer crypt.DeviceID, idx *protocol.SealedIndex) error {
	keys := b.keys(ctx, f.ID())
	if keys == nil {
		return fmt.Errorf("folder %s has no key for receiver records", f.ID())
	}
	s := b.share(f.ID())
	set := f.Index()
	best := map[string]index.Record{}
	var last, own, ownAt int64
	var lacking int64                   // the first record sealed with a key this device lacks
	seen := map[crypt.DeviceID]uint64{} // highest counter per origin
	for _, sr := range idx.GetRecords() {
		last = max(last, sr.GetSequence())
		r, err := sealed.Open(keys, f.ID(), sr)
		if errors.Is(err, crypt.ErrNewerKey) {
			if lacking == 0 {
				lacking = sr.GetSequence()
			}
			s.setReceiverError(peer, fmt.Errorf("receiver %s holds records sealed with a newer folder key (rotated on another device): share the folder with it again, with the current password, to fetch the key", peer.Short()))
			continue
		}
		if err != nil {
			s.tamperedRecords.Add(1)
			s.setReceiverError(peer, fmt.Errorf("a record from receiver %s failed verification (tampered or damaged): %w", peer.Short(), err))
			f.Log().Warn("receiver sent a bad record", "device", peer.String(), "err", err)
			continue
		}
		origin := crypt.DeviceID(sr.GetOrigin())
		seen[origin] = max(seen[origin], sr.GetCounter())
		if origin == b.id && r.Sequence > own {
			own, ownAt = r.Sequence, sr.GetSequence()
		}
		r.Sequence = sr.GetSequence()
		cur, ok := best[r.Name]
		if !ok {
			cur, ok = set.Remote(peer, r.Name)
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
	if err := set.UpdateRemote(ctx, peer, recs); err != nil {
		return fmt.Errorf("storing receiver records of %s: %w", f.ID(), err)
	}
	// Written in this order for fork checks (fork.go): the counters seen
	// before the cursor passes them.
	if err := b.raiseOrigins(ctx, f.ID(), peer, seen, nil); err != nil {
		return err
	}
	// The cursor stays before a record this device could not open for
	// want of a newer key, so that the receiver sends it again once the
	// key is here (setFolderRing).
	if hold := s.holdCursor(peer, lacking); hold > 0 {
		last = min(last, hold-1)
	}
	v := b.view(ctx, f.ID(), peer)
	if last > v.Cursor {
		if err := b.db.SetReceiverCursor(ctx, f.ID(), peer.String(), last); err != nil {
			return err
		}
	}
	if own > 0 && own > v.Held {
		if err := b.db.SetReceiverHeld(ctx, f.ID(), peer.String(), own, ownAt); err != nil {
			return err
		}
		b.claims.notify()
	}
	b.checkClaims(ctx, f, peer)
	if len(recs) > 0 {
		f.RequestPull()
	}
	return nil
}

// SealedBlock fetches a block of folderID from receiver peer by its chunk
// ID and opens it, which checks its plaintext against the block's hash.
// The data is to be given back with protocol.Recycle.
func (b *Backup) SealedBlock(ctx context.Context, folderID string, peer crypt.DeviceID, blk index.Block) ([]byte, error) {
	keys := b.keys(ctx, folderID)
	if keys == nil {
		return nil, errors.New("no folder key")
	}
	id := keys.ChunkID(blk.Hash)
	body, err := b.net.RequestPeer(ctx, peer, &protocol.Request{
		Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: folderID, ChunkId: id[:], Size: uint32(crypt.MaxSealedChunkSize),
	})
	if err != nil {
		return nil, err
	}
	plain, err := keys.OpenBlockTo(nil, blk.Hash, body)
	protocol.Recycle(body)
	if errors.Is(err, crypt.ErrNewerKey) {
		b.share(folderID).setReceiverError(peer, fmt.Errorf("receiver %s holds chunks sealed with a newer folder key (rotated on another device): share the folder with it again, with the current password, to fetch the key", peer.Short()))
		return nil, err
	}
	if err != nil {
		s := b.share(folderID)
		s.tamperedChunks.Add(1)
		s.setReceiverError(peer, fmt.Errorf("a chunk from receiver %s failed verification (tampered or damaged): %w", peer.Short(), err))
		b.log.Warn("receiver sent a bad chunk", "folder", folderID, "device", peer.String(), "err", err)
		return nil, err
	}
	return plain, nil
}

// Reconcile acts on a receiver's cluster config entry of a folder shared
// with it: it checks the receiver did not roll back, and starts sending
// it records. The rollback checks need a fresh entry: one applied again
// after a configuration change is as old as the connection, and the
// receiver has served more since.
func (b *Backup) Reconcile(p *router.Peer, wf *protocol.Folder, fresh bool) error {
	f := b.folders.Folder(wf.GetId())
	if f == nil {
		return nil
	}
	peer, ctx, s := p.ID, p.Context(), b.share(f.ID())
	keys := b.keys(ctx, f.ID())
	if keys == nil {
		s.setReceiverError(peer, fmt.Errorf("receiver %s shares the folder, but this device has no key for it: share it again with the password", peer.Short()))
		return nil
	}
	var mine, theirs *protocol.FolderDevice
	for _, d := range wf.GetDevices() {
		switch string(d.GetDeviceId()) {
		case string(b.id[:]):
			mine = d
		case string(peer[:]):
			theirs = d
		}
	}
	if theirs != nil && theirs.GetIndexId() != 0 {
		known := b.logID(ctx, f.ID(), peer)
		if known == theirs.GetIndexId() {
			if seen := b.view(ctx, f.ID(), peer).Cursor; fresh && theirs.GetMaxSequence() < seen {
				err := fmt.Errorf("%w: receiver %s serves its log up to %d, but this device has already seen it up to %d; refusing it", ErrRollback, peer.Short(), theirs.GetMaxSequence(), seen)
				s.setReceiverError(peer, err)
				return err
			}
		} else if err := b.noteReceiverLog(ctx, f, peer, known, theirs.GetIndexId()); err != nil {
			return err
		}
	}
	held := int64(mine.GetMaxSequence())
	served := b.view(ctx, f.ID(), peer).Held
	if fresh && held < served {
		err := fmt.Errorf("%w: receiver %s says it holds this device's records up to %d, but it has served them up to %d; refusing it", ErrRollback, peer.Short(), held, served)
		s.setReceiverError(peer, err)
		return err
	}
	var claim int64 // a claim of more of our records than we have, to verify
	if held > f.Index().LocalSequence() {
		// The receiver may hold records of an earlier database of this
		// device, which ours must be numbered past, or it would take them
		// for copies; or it lies. Only records it serves back, which open
		// under the folder key, prove it: renumber once they did.
		claim, held = held, served
	}
	if theirs != nil && theirs.GetIndexId() != 0 {
		// The receiver's high-water mark per origin, for fork checks.
		marks := map[crypt.DeviceID]uint64{}
		for _, d := range wf.GetDevices() {
			if id := crypt.DeviceID(d.GetDeviceId()); id != peer && d.GetMaxSequence() > 0 {
				marks[id] = max(marks[id], uint64(d.GetMaxSequence()))
			}
		}
		if err := b.raiseOrigins(ctx, f.ID(), peer, nil, marks); err != nil {
			return err
		}
		b.checkClaims(ctx, f, peer)
	}
	s.setReceiverError(peer, nil)
	b.startUpload(p, f, keys, held, claim, theirs.GetMaxSequence())
	return nil
}

// claimWait bounds how long an upload waits for a receiver to serve back
// the records of this device it claims to hold.
var claimWait = 2 * time.Minute

// verifyClaim waits until receiver peer has served back this device's
// records up to claim (then it renumbers the local index past them and
// returns claim), or has served its whole log (up to logEnd) without them,
// or claimWait passed: then it reports the receiver and returns what it
// did serve. A receiver's word alone never renumbers the local index: a
// claim of 2^63 would end every later scan in "negative sequence".
func (b *Backup) verifyClaim(ctx context.Context, f Folder, peer crypt.DeviceID, claim, logEnd int64) int64 {
	deadline := time.Now().Add(claimWait)
	for {
		v := b.view(ctx, f.ID(), peer)
		if v.Held >= claim {
			if claim > f.Index().LocalSequence() {
				f.Log().Info("receiver holds newer records of this device than its index; renumbering", "device", peer.String(), "held", claim)
				if err := f.Index().Renumber(ctx, claim); err != nil {
					f.Log().Error("renumbering the local index", "err", err)
				}
			}
			return claim
		}
		if v.Cursor >= logEnd || time.Now().After(deadline) {
			err := fmt.Errorf("%w: receiver %s claims to hold this device's records up to %d, but served them only up to %d; a fork or a lie, not believed", ErrFalseClaim, peer.Short(), claim, v.Held)
			b.share(f.ID()).setReceiverError(peer, err)
			f.Log().Warn("receiver claims records it does not show", "device", peer.String(), "claim", claim, "served", v.Held)
			return v.Held
		}
		select {
		case <-ctx.Done():
			return v.Held
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ErrFalseClaim means a receiver claims to hold records of this device it
// does not serve back.
var ErrFalseClaim = errors.New("receiver's claim not shown")

// startUpload starts sending f's sealed records to the receiver from
// start, unless that runs already; a claim of more of this device's
// records than its index has (claim > 0) is verified first (verifyClaim).
func (b *Backup) startUpload(p *router.Peer, f Folder, keys *crypt.Keys, start, claim, logEnd int64) {
	l := b.link(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.senders[f.ID()]; ok {
		if s.f == f {
			return
		}
		s.stop() // the folder was restarted
	}
	ctx, stop := context.WithCancel(p.Context())
	u := b.newUpload(f, keys, p.ID)
	l.senders[f.ID()] = sender{f: f, stop: stop}
	l.uploads[f.ID()] = u
	p.Go(func() {
		// Requests can't be made from the reader goroutine reconcile runs
		// on, so a pending envelope is settled here.
		if !b.settleEnvelope(ctx, p, f) {
			return
		}
		if claim > 0 {
			start = b.verifyClaim(ctx, f, p.ID, claim, logEnd)
		}
		u.send(ctx, p, start)
	})
}

// noteReceiverLog records the ID of the log receiver peer serves (known is
// the one recorded before, id the one announced). A log that started over
// replaces everything this device knew of the old one; when none was
// known, what the receiver already sent is of this log and stays (its
// log can arrive before the first reconcile, as a trusted peer's index
// can).
func (b *Backup) noteReceiverLog(ctx context.Context, f Folder, peer crypt.DeviceID, known, id uint64) error {
	if known != 0 {
		f.Log().Info("receiver's log started over; fetching it again", "device", peer.String())
		if err := f.Index().DropRemote(ctx, peer); err != nil {
			return err
		}
		if err := b.forgetReceiverLog(ctx, f.ID(), peer); err != nil {
			return err
		}
	}
	return b.db.SetPeerIndexID(ctx, f.ID(), peer.String(), id)
}
