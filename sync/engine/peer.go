package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/router"
)

// sender is a running index sender.
type sender struct {
	f    *folder
	stop context.CancelFunc
}

// link is what trusted sync runs on one connection: an index sender per
// shared folder.
type link struct {
	p *router.Peer

	mu      sync.Mutex
	senders map[string]sender // by folder ID
}

// link returns the state of p's connection, made on first use; a new
// connection of the same peer replaces the old one's.
func (e *Engine) link(p *router.Peer) *link {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.links[p.ID]
	if l == nil || l.p != p {
		l = &link{p: p, senders: map[string]sender{}}
		e.links[p.ID] = l
	}
	return l
}

// Shares reports whether folderID runs here and is shared with peer, and
// whether peer is an untrusted receiver of it.
func (e *Engine) Shares(folderID string, peer crypt.DeviceID) (shared, untrusted bool) {
	f := e.folder(folderID)
	if f == nil {
		return false, false
	}
	return f.sharedWith(peer), f.untrusted(peer)
}

// ClusterFolders lists the folders shared with peer as a trusted device,
// with how much of whose index each side has.
func (e *Engine) ClusterFolders(ctx context.Context, peer crypt.DeviceID) []*protocol.Folder {
	var out []*protocol.Folder
	for _, f := range e.runningFolders() {
		if !f.sharedWith(peer) || f.untrusted(peer) {
			continue
		}
		wf, err := f.entry(ctx)
		if err != nil {
			f.log.Warn("folder's cluster config entry", "err", err)
			continue
		}
		wf.Devices = append(wf.Devices, &protocol.FolderDevice{DeviceId: peer[:], MaxSequence: f.set.RemoteSequence(peer), IndexId: e.peerIndexID(ctx, f.id, peer)})
		out = append(out, wf)
	}
	return out
}

// entry is the folder's own cluster config entry: ID, label, type,
// polynomial, and this device with its index ID and sequence.
func (f *folder) entry(ctx context.Context) (*protocol.Folder, error) {
	myIndex, err := f.e.indexID(ctx, f.id)
	if err != nil {
		return nil, fmt.Errorf("index ID: %w", err)
	}
	pol, fixed, err := f.polynomialState(ctx)
	if err != nil {
		return nil, fmt.Errorf("chunking polynomial: %w", err)
	}
	cfg := f.config()
	return &protocol.Folder{
		Id:              f.id,
		Label:           cfg.Label,
		Type:            wireFolderType(cfg.Type),
		Polynomial:      uint64(pol),
		PolynomialFixed: fixed,
		Devices:         []*protocol.FolderDevice{{DeviceId: f.e.id[:], MaxSequence: f.set.LocalSequence(), IndexId: myIndex}},
	}, nil
}

func wireFolderType(t db.FolderType) protocol.FolderType {
	switch t {
	case db.SendOnly:
		return protocol.FolderType_FOLDER_TYPE_SEND_ONLY
	case db.ReceiveOnly:
		return protocol.FolderType_FOLDER_TYPE_RECEIVE_ONLY
	case db.Encrypted:
		return protocol.FolderType_FOLDER_TYPE_ENCRYPTED
	}
	return protocol.FolderType_FOLDER_TYPE_SEND_RECEIVE
}

// Reconcile acts on a trusted peer's entry of a folder both share: it
// adopts the peer's polynomial where that is due, reconciles index IDs,
// and starts sending this node's index from where the peer has it.
func (e *Engine) Reconcile(p *router.Peer, wf *protocol.Folder) error {
	f := e.folder(wf.GetId())
	if f == nil {
		return nil
	}
	ctx, peer := p.Context(), p.ID
	var mine, theirs *protocol.FolderDevice
	for _, d := range wf.GetDevices() {
		switch {
		case string(d.GetDeviceId()) == string(e.id[:]):
			mine = d
		case string(d.GetDeviceId()) == string(peer[:]):
			theirs = d
		}
	}
	if err := f.adoptPolynomial(ctx, wf.GetPolynomial(), theirs.GetMaxSequence() > 0 || wf.GetPolynomialFixed()); err != nil {
		e.log.Warn("adopting the peer's chunking polynomial", "folder", f.id, "err", err)
	}
	if theirs != nil && theirs.GetIndexId() != 0 {
		if err := f.notePeerIndex(ctx, peer, theirs.GetIndexId()); err != nil {
			return err
		}
	}
	myIndex, err := e.indexID(ctx, f.id)
	if err != nil {
		return err
	}
	var start int64
	if mine != nil && mine.GetIndexId() == myIndex {
		start = mine.GetMaxSequence()
	}
	e.startSender(p, f, start)
	return nil
}

// Stop ends the index senders on p of folders not in keep.
func (e *Engine) Stop(p *router.Peer, keep map[string]bool) {
	l := e.link(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, s := range l.senders {
		if !keep[id] {
			s.stop()
			delete(l.senders, id)
		}
	}
}

// Closed forgets p's connection; pulls that need it look for other
// sources.
func (e *Engine) Closed(p *router.Peer) {
	e.mu.Lock()
	if l := e.links[p.ID]; l != nil && l.p == p {
		delete(e.links, p.ID)
	}
	e.mu.Unlock()
	for _, f := range e.runningFolders() {
		f.peerGone(p.ID)
	}
}

// startSender starts sending f's local index to the peer from start,
// unless a sender for it runs already.
func (e *Engine) startSender(p *router.Peer, f *folder, start int64) {
	l := e.link(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.senders[f.id]; ok {
		if s.f == f {
			return
		}
		s.stop() // the folder was restarted
	}
	ctx, stop := context.WithCancel(p.Context())
	l.senders[f.id] = sender{f: f, stop: stop}
	p.Go(func() { e.sendIndex(ctx, p, f, start) })
}

// maxIndexMessage bounds one Index message's encoded files. Decoded, a
// message takes several times its size until the peer has stored it (at
// 4 MiB, about 20,000 files, it was the largest part of a node's peak
// while it took in a large folder), and more messages cost nothing that
// shows.
const maxIndexMessage = 1 << 20

// sendIndex sends the local records after start, first as an Index, then
// as IndexUpdates whenever the folder's index changes.
func (e *Engine) sendIndex(ctx context.Context, p *router.Peer, f *folder, start int64) {
	sent := start
	first := true
	for {
		changed := f.indexChanged()
		recs := f.set.LocalSince(sent)
		if len(recs) > 0 || first {
			files := make([]*protocol.FileInfo, len(recs))
			for i := range recs {
				files[i] = index.ToWire(&recs[i])
			}
			batches := protocol.BatchFiles(files, maxIndexMessage)
			if len(batches) == 0 {
				batches = [][]*protocol.FileInfo{nil}
			}
			for _, b := range batches {
				var err error
				if first {
					err = p.Conn.Index(ctx, &protocol.Index{Folder: f.id, Files: b})
					first = false
				} else {
					err = p.Conn.IndexUpdate(ctx, &protocol.IndexUpdate{Folder: f.id, Files: b})
				}
				if err != nil {
					if ctx.Err() == nil {
						e.log.Debug("sending index", "folder", f.id, "device", p.ID.String(), "err", err)
					}
					return
				}
			}
			if len(recs) > 0 {
				sent = recs[len(recs)-1].Sequence
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// Index takes a trusted peer's index (full or update) of a folder shared
// with it; the router has checked that.
func (e *Engine) Index(p *router.Peer, folderID string, files []*protocol.FileInfo) error {
	f := e.folder(folderID)
	if f == nil {
		return nil
	}
	recs := make([]index.Record, 0, len(files))
	for _, fi := range files {
		r, err := index.FromWire(fi)
		if err != nil {
			e.log.Warn("refusing a record from a peer", "folder", folderID, "device", p.ID.String(), "err", err)
			continue
		}
		recs = append(recs, r)
	}
	if err := f.set.UpdateRemote(p.Context(), p.ID, recs); err != nil {
		return fmt.Errorf("storing index of %s: %w", folderID, err)
	}
	e.opts.Events.Publish(events.FolderSummary{Folder: folderID})
	f.requestPull()
	return nil
}

// ServeBlock serves a block of a local file to a trusted peer: only of a
// file this device announced, at a block of its announced version. An
// ignored file, or a name never announced, is no file to a peer.
func (e *Engine) ServeBlock(req *protocol.Request) ([]byte, error) {
	f := e.folder(req.GetFolder())
	if f == nil {
		return nil, protocol.ErrNoSuchFile
	}
	l, ok := f.set.Local(req.GetName())
	if !ok || l.Deleted || l.Type != index.File || f.ignoredName(req.GetName()) {
		return nil, protocol.ErrNoSuchFile
	}
	// Blocks tile the file in offset order (index.FromWire, the scanner).
	i, found := slices.BinarySearchFunc(l.Blocks, req.GetOffset(), func(b index.Block, off int64) int { return cmp.Compare(b.Offset, off) })
	if !found || l.Blocks[i].Size != req.GetSize() || (len(req.GetHash()) > 0 && string(l.Blocks[i].Hash[:]) != string(req.GetHash())) {
		return nil, protocol.ErrNoSuchFile
	}
	return f.readBlock(req)
}

// notePeerIndex records the incarnation of peer's index the peer
// announced. Records of an earlier incarnation are dropped (the peer will
// send its index again); when none was known, whatever the peer sent is of
// this one and stays: its index can arrive before the first reconcile
// that names it (it answers our ClusterConfig at once, and reconcile runs
// after ours is sent), and dropping it would leave us needing files no
// peer is known to have until the connection is made again.
func (f *folder) notePeerIndex(ctx context.Context, peer crypt.DeviceID, id uint64) error {
	e := f.e
	known := e.peerIndexID(ctx, f.id, peer)
	if known == id {
		return nil
	}
	if known != 0 {
		e.log.Info("peer's index was reset; fetching it again", "folder", f.id, "device", peer.String())
		if err := f.set.DropRemote(ctx, peer); err != nil {
			return fmt.Errorf("dropping old index: %w", err)
		}
	}
	return e.setPeerIndexID(ctx, f.id, peer, id)
}
