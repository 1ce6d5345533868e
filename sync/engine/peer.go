package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

// sender is a running index sender.
type sender struct {
	f    *folder
	stop context.CancelFunc
}

// peerConn is a live protocol connection and the index senders running on
// it, one per shared folder.
type peerConn struct {
	e    *Engine
	id   crypt.DeviceID
	conn *protocol.Conn
	ctx  context.Context

	// reconcileMu serialises reconcile: it runs on the connection's reader
	// (a new cluster config) and on Reload (a new configuration) alike,
	// and two at once could both see a new index ID and the second drop
	// records that arrived after the first.
	reconcileMu sync.Mutex

	mu       sync.Mutex
	lastCC   *protocol.ClusterConfig // the peer's latest
	freshCC  bool                    // lastCC was not reconciled yet
	senders  map[string]sender       // by folder ID
	uploads  map[string]*upload      // by folder ID, to a receiver
	claiming bool                    // sendClaims runs
	wg       sync.WaitGroup
}

// ServeConn runs the protocol on an authenticated connection to peer until
// it ends or ctx is canceled.
func (e *Engine) ServeConn(ctx context.Context, peer crypt.DeviceID, rw io.ReadWriteCloser) error {
	<-e.ready
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pc := &peerConn{e: e, id: peer, ctx: ctx, senders: map[string]sender{}, uploads: map[string]*upload{}}
	pc.conn = protocol.NewConn(protocol.DeviceID(peer), rw, e, protocol.Options{})
	e.mu.Lock()
	if old := e.conns[peer]; old != nil {
		old.conn.Close("replaced by a new connection")
	}
	e.conns[peer] = pc
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.conns[peer] == pc {
			delete(e.conns, peer)
		}
		e.mu.Unlock()
		for _, f := range e.runningFolders() {
			f.peerGone(peer)
		}
	}()
	errc := make(chan error, 1)
	go func() { errc <- pc.conn.Serve(ctx) }()
	pc.sendClusterConfig(ctx)
	err := <-errc
	cancel()
	pc.wg.Wait()
	if e.recv != nil {
		e.recv.Closed(pc.conn)
	}
	return err
}

// sendClusterConfig tells the peer which folders this node shares with it
// and how much of whose index each side has.
func (pc *peerConn) sendClusterConfig(ctx context.Context) {
	e := pc.e
	cc := &protocol.ClusterConfig{}
	for _, f := range e.runningFolders() {
		if !f.sharedWith(pc.id) {
			continue
		}
		myIndex, err := e.indexID(ctx, f.id)
		if err != nil {
			e.log.Warn("index ID", "folder", f.id, "err", err)
			continue
		}
		pol, fixed, err := f.polynomialState(ctx)
		if err != nil {
			e.log.Warn("chunking polynomial", "folder", f.id, "err", err)
			continue
		}
		cfg := f.config()
		if f.untrusted(pc.id) {
			// No polynomial, and the receiver's entry carries how much of
			// its log this node has seen.
			cc.Folders = append(cc.Folders, &protocol.Folder{
				Id:    f.id,
				Label: cfg.Label,
				Type:  wireFolderType(cfg.Type),
				Devices: []*protocol.FolderDevice{
					{DeviceId: e.id[:], MaxSequence: f.set.LocalSequence(), IndexId: myIndex},
					{DeviceId: pc.id[:], MaxSequence: e.settingInt(ctx, logCursorSetting(f.id, pc.id)), IndexId: e.peerIndexID(ctx, f.id, pc.id), Encrypted: true},
				},
			})
			continue
		}
		cc.Folders = append(cc.Folders, &protocol.Folder{
			Id:              f.id,
			Label:           cfg.Label,
			Type:            wireFolderType(cfg.Type),
			Polynomial:      uint64(pol),
			PolynomialFixed: fixed,
			Devices: []*protocol.FolderDevice{
				{DeviceId: e.id[:], MaxSequence: f.set.LocalSequence(), IndexId: myIndex},
				{DeviceId: pc.id[:], MaxSequence: f.set.RemoteSequence(pc.id), IndexId: e.peerIndexID(ctx, f.id, pc.id)},
			},
		})
	}
	if e.recv != nil {
		cc.Folders = append(cc.Folders, e.recv.ClusterFolders(ctx, pc.id)...)
	}
	if err := pc.conn.ClusterConfig(ctx, cc); err != nil && ctx.Err() == nil {
		e.log.Debug("sending cluster config", "device", pc.id.String(), "err", err)
	}
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

// ClusterConfig handles the peer's folder list: it records offers of
// folders this node does not share with the peer, reconciles index IDs, and
// starts sending this node's index of every folder both share.
func (e *Engine) ClusterConfig(wirePeer protocol.DeviceID, cc *protocol.ClusterConfig) error {
	pc := e.conn(crypt.DeviceID(wirePeer))
	if pc == nil {
		return errors.New("cluster config from a peer without a connection")
	}
	pc.mu.Lock()
	pc.lastCC = cc
	pc.freshCC = true
	pc.mu.Unlock()
	return pc.reconcile()
}

// reconcile acts on the peer's latest cluster config against this node's
// current folders. It runs when the peer's config arrives and again when
// this node's configuration changes, so a folder shared on this side after
// the peer announced it starts syncing at once.
func (pc *peerConn) reconcile() error {
	pc.reconcileMu.Lock()
	defer pc.reconcileMu.Unlock()
	e, peer, ctx := pc.e, pc.id, pc.ctx
	pc.mu.Lock()
	cc, fresh := pc.lastCC, pc.freshCC
	pc.freshCC = false
	pc.mu.Unlock()
	if cc == nil {
		return nil
	}
	offered := map[string]bool{}
	for _, wf := range cc.GetFolders() {
		if e.recv != nil && e.recv.Holds(wf.GetId()) {
			if e.sharesHeld(ctx, wf.GetId(), peer) {
				if err := e.recv.ClusterConfig(ctx, pc.conn, wf); err != nil {
					return err
				}
				continue
			}
		}
		f := e.folder(wf.GetId())
		if f != nil && f.sharedWith(peer) && f.untrusted(peer) {
			if err := pc.reconcileReceiver(f, wf, fresh); err != nil {
				return err
			}
			offered[f.id] = true
			continue
		}
		if f == nil || !f.sharedWith(peer) {
			if err := e.db.AddPendingFolder(ctx, db.PendingFolder{DeviceID: peer.String(), FolderID: wf.GetId(), Label: wf.GetLabel(), FirstSeen: time.Now(), Encrypted: offeredEncrypted(wf, e.id)}); err != nil && !errors.Is(err, db.ErrConstraint) {
				e.log.Warn("recording folder offer", "folder", wf.GetId(), "err", err)
			} else if err == nil {
				e.log.Info("folder offered by device", "folder", wf.GetId(), "device", peer.String())
			}
			continue
		}
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
		pc.startSender(f, start)
		pc.startClaims()
		offered[f.id] = true
	}
	e.claims.notify() // claims for folders shared just now
	// Folders the peer stopped sharing: stop sending them.
	pc.mu.Lock()
	for id, s := range pc.senders {
		if !offered[id] {
			s.stop()
			delete(pc.senders, id)
			delete(pc.uploads, id)
		}
	}
	pc.mu.Unlock()
	return nil
}

// startSender starts sending f's local index to the peer from start,
// unless a sender for it runs already.
func (pc *peerConn) startSender(f *folder, start int64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if s, ok := pc.senders[f.id]; ok {
		if s.f == f {
			return
		}
		s.stop() // the folder was restarted
	}
	ctx, stop := context.WithCancel(pc.ctx)
	pc.senders[f.id] = sender{f: f, stop: stop}
	pc.wg.Go(func() { pc.sendIndex(ctx, f, start) })
}

// maxIndexMessage bounds one Index message's encoded files.
const maxIndexMessage = 4 << 20

// sendIndex sends the local records after start, first as an Index, then
// as IndexUpdates whenever the folder's index changes.
func (pc *peerConn) sendIndex(ctx context.Context, f *folder, start int64) {
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
					err = pc.conn.Index(ctx, &protocol.Index{Folder: f.id, Files: b})
					first = false
				} else {
					err = pc.conn.IndexUpdate(ctx, &protocol.IndexUpdate{Folder: f.id, Files: b})
				}
				if err != nil {
					if ctx.Err() == nil {
						pc.e.log.Debug("sending index", "folder", f.id, "device", pc.id.String(), "err", err)
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

// Index handles a peer's full index of a folder.
func (e *Engine) Index(peer protocol.DeviceID, idx *protocol.Index) error {
	return e.indexUpdate(crypt.DeviceID(peer), idx.GetFolder(), idx.GetFiles())
}

// IndexUpdate handles a peer's index changes.
func (e *Engine) IndexUpdate(peer protocol.DeviceID, idx *protocol.IndexUpdate) error {
	return e.indexUpdate(crypt.DeviceID(peer), idx.GetFolder(), idx.GetFiles())
}

func (e *Engine) indexUpdate(peer crypt.DeviceID, folderID string, files []*protocol.FileInfo) error {
	f := e.folder(folderID)
	if f != nil && f.untrusted(peer) {
		return fmt.Errorf("plaintext index of %s from an untrusted receiver", folderID)
	}
	if f == nil || !f.sharedWith(peer) {
		// Not an error: the configuration may have changed in flight.
		e.log.Debug("index for a folder not shared with the peer", "folder", folderID, "device", peer.String())
		return nil
	}
	recs := make([]index.Record, 0, len(files))
	for _, fi := range files {
		r, err := index.FromWire(fi)
		if err != nil {
			e.log.Warn("refusing a record from a peer", "folder", folderID, "device", peer.String(), "err", err)
			continue
		}
		recs = append(recs, r)
	}
	pc := e.conn(peer)
	ctx := context.Background()
	if pc != nil {
		ctx = pc.ctx
	}
	if err := f.set.UpdateRemote(ctx, peer, recs); err != nil {
		return fmt.Errorf("storing index of %s: %w", folderID, err)
	}
	f.requestPull()
	return nil
}

// Request serves a block of a local file to a trusted peer, a sealed
// chunk to a receiver of a folder, or, on a receiver, what it holds.
func (e *Engine) Request(ctx context.Context, wirePeer protocol.DeviceID, req *protocol.Request) ([]byte, error) {
	peer := crypt.DeviceID(wirePeer)
	if e.recv != nil && e.recv.Holds(req.GetFolder()) {
		return e.recv.Request(ctx, peer, req)
	}
	f := e.folder(req.GetFolder())
	if f == nil || !f.sharedWith(peer) {
		return nil, protocol.ErrNoSuchFile
	}
	if f.untrusted(peer) {
		if req.GetKind() != protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK {
			return nil, protocol.ErrNoSuchFile // never plaintext to a receiver
		}
		pc := e.conn(peer)
		if pc == nil {
			return nil, protocol.ErrNoSuchFile
		}
		return pc.serveSealedChunk(req)
	}
	if req.GetKind() != protocol.RequestKind_REQUEST_KIND_FILE_BLOCK {
		return nil, protocol.ErrInvalidFile
	}
	return f.readBlock(req)
}

// SealedIndex takes sealed records: on a receiver, to store; on a trusted
// device, a receiver's log to open.
func (e *Engine) SealedIndex(wirePeer protocol.DeviceID, idx *protocol.SealedIndex) error {
	peer := crypt.DeviceID(wirePeer)
	pc := e.conn(peer)
	if pc == nil {
		return errors.New("sealed index from a peer without a connection")
	}
	if e.recv != nil && e.recv.Holds(idx.GetFolder()) {
		return e.recv.SealedIndex(pc.conn, idx)
	}
	f := e.folder(idx.GetFolder())
	if f == nil || !f.untrusted(peer) {
		e.log.Debug("sealed index for a folder not shared with the receiver", "folder", idx.GetFolder(), "device", peer.String())
		return nil
	}
	if err := f.sealedIndexFrom(pc.ctx, peer, idx); err != nil {
		return err
	}
	if n := len(idx.GetRecords()); n > 0 {
		return pc.conn.SealedAck(pc.ctx, &protocol.SealedAck{Folder: f.id, Sequence: idx.GetRecords()[n-1].GetSequence()})
	}
	return nil
}

// SealedAck takes a peer's acknowledgement of sealed records.
func (e *Engine) SealedAck(wirePeer protocol.DeviceID, ack *protocol.SealedAck) error {
	pc := e.conn(crypt.DeviceID(wirePeer))
	if pc == nil {
		return nil
	}
	if e.recv != nil && e.recv.Holds(ack.GetFolder()) {
		return e.recv.SealedAck(pc.conn, ack)
	}
	pc.sealedAck(ack)
	return nil
}

// offeredEncrypted reports whether a folder offer lists this node as an
// untrusted receiver of it.
func offeredEncrypted(wf *protocol.Folder, self crypt.DeviceID) bool {
	for _, d := range wf.GetDevices() {
		if string(d.GetDeviceId()) == string(self[:]) {
			return d.GetEncrypted()
		}
	}
	return false
}

// Closed is called once when a connection ends.
func (e *Engine) Closed(peer protocol.DeviceID, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		e.log.Debug("protocol connection closed", "device", crypt.DeviceID(peer).String(), "err", err)
	}
}

// request sends a request to a peer.
func (e *Engine) request(ctx context.Context, peer crypt.DeviceID, req *protocol.Request) ([]byte, error) {
	pc := e.conn(peer)
	if pc == nil {
		return nil, errors.New("not connected")
	}
	return pc.conn.Request(ctx, req)
}

// connected reports whether a peer has a live protocol connection.
func (e *Engine) connected(peer crypt.DeviceID) bool {
	return e.conn(peer) != nil
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
