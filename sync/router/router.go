// Package router runs the protocol on every authenticated connection and
// gives each folder's messages to the part of the node that owns them:
//
//   - trusted sync (sync/engine), for a folder shared with a trusted peer;
//   - backup (sync/backup), for a folder this node shares with an
//     untrusted receiver: sealed records and chunks go out, the
//     receiver's log comes back;
//   - the receiver (sync/receiver), for an encrypted folder this node
//     holds for others.
//
// It is the one place that decides, per message, which side of the trust
// boundary handles it: plaintext (an index, a file block) is only ever
// exchanged with a peer the folder's owner calls trusted, and a peer's
// message about a folder that is not shared with it never reaches a
// handler. Folder offers (a peer sharing a folder this node does not
// share with it) are recorded as pending here.
//
// Invariants:
//   - One Peer per device: a new connection replaces the old one, and
//     every goroutine a handler starts on a Peer (Peer.Go) has ended
//     before the connection's ServeConn returns.
//   - Handlers see a peer's cluster config folder by folder, each entry
//     given to exactly one of them, and learn when the peer stopped
//     offering a folder (Stop) and when the connection ended (Closed).
package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/sync/protocol"
)

// Trusted is trusted sync (sync/engine) as the router needs it.
type Trusted interface {
	// Shares reports whether folderID runs here and is shared with peer,
	// and whether peer is an untrusted receiver of it.
	Shares(folderID string, peer crypt.DeviceID) (shared, untrusted bool)
	// ClusterFolders lists the folders shared with peer as a trusted
	// device, for its cluster config.
	ClusterFolders(ctx context.Context, peer crypt.DeviceID) []*protocol.Folder
	// Reconcile acts on the peer's entry of a folder both share.
	Reconcile(p *Peer, wf *protocol.Folder) error
	// Index takes a trusted peer's index (full or update) of a folder.
	Index(p *Peer, folderID string, files []*protocol.FileInfo) error
	// ServeBlock answers a trusted peer's request for a block of a file.
	ServeBlock(req *protocol.Request) ([]byte, error)
	// Stop ends what runs on p for folders not in keep.
	Stop(p *Peer, keep map[string]bool)
	// Closed is called once p's connection has ended.
	Closed(p *Peer)
}

// Backup is the sending side of encrypted shares (sync/backup).
type Backup interface {
	// ClusterFolders lists the folders shared with peer as a receiver.
	ClusterFolders(ctx context.Context, peer crypt.DeviceID) []*protocol.Folder
	// Reconcile acts on a receiver's entry of a folder shared with it;
	// fresh says the entry arrived since the last call.
	Reconcile(p *Peer, wf *protocol.Folder, fresh bool) error
	// TrustedPeer says p shares a folder as a trusted device, to exchange
	// notes about receivers with.
	TrustedPeer(p *Peer)
	SealedIndex(p *Peer, idx *protocol.SealedIndex) error
	SealedAck(p *Peer, ack *protocol.SealedAck)
	// ServeChunk answers a receiver's request for a sealed chunk.
	ServeChunk(p *Peer, req *protocol.Request) ([]byte, error)
	ReceiverClaims(p *Peer, rc *protocol.ReceiverClaims) error
	Stop(p *Peer, keep map[string]bool)
	Closed(p *Peer)
}

// Receiver is the untrusted side (sync/receiver): the encrypted folders
// this node holds for others. It speaks to each peer over its connection.
type Receiver interface {
	Reload(ctx context.Context) error
	Holds(folderID string) bool
	ClusterFolders(ctx context.Context, peer crypt.DeviceID) []*protocol.Folder
	ClusterConfig(ctx context.Context, c *protocol.Conn, wf *protocol.Folder) error
	SealedIndex(c *protocol.Conn, idx *protocol.SealedIndex) error
	SealedAck(c *protocol.Conn, ack *protocol.SealedAck) error
	Request(ctx context.Context, peer crypt.DeviceID, req *protocol.Request) ([]byte, error)
	Closed(c *protocol.Conn)
}

// Router routes the protocol messages of a node's connections. Create it
// with New, give it its handlers with Handle before the first connection,
// and serve connections with ServeConn. Safe for concurrent use.
type Router struct {
	id  crypt.DeviceID
	db  *db.DB
	log *slog.Logger

	trusted Trusted
	backup  Backup
	recv    Receiver    // nil on a node that holds no encrypted folders
	events  *events.Bus // nil: none published

	mu    sync.Mutex
	peers map[crypt.DeviceID]*Peer
}

// New returns a router for the node id; it publishes connections and
// folder offers on bus, which may be nil.
func New(id crypt.DeviceID, database *db.DB, log *slog.Logger, bus *events.Bus) *Router {
	return &Router{id: id, db: database, log: log, events: bus, peers: map[crypt.DeviceID]*Peer{}}
}

// Handle sets the handlers; recv may be nil.
func (r *Router) Handle(trusted Trusted, backup Backup, recv Receiver) {
	r.trusted, r.backup, r.recv = trusted, backup, recv
}

// Peer is one live connection to a device, as handlers see it.
type Peer struct {
	ID   crypt.DeviceID
	Conn *protocol.Conn

	ctx context.Context
	wg  sync.WaitGroup

	// reconcileMu serialises reconcile: it runs on the connection's reader
	// (a new cluster config) and on Refresh (a new configuration) alike,
	// and two at once could both see a new index ID and the second drop
	// records that arrived after the first.
	reconcileMu sync.Mutex

	mu      sync.Mutex
	lastCC  *protocol.ClusterConfig // the peer's latest
	freshCC bool                    // lastCC was not reconciled yet
}

// Context ends when the connection does.
func (p *Peer) Context() context.Context { return p.ctx }

// Go runs fn on its own goroutine; the connection's end waits for it, so
// fn must return once Context is done.
func (p *Peer) Go(fn func()) { p.wg.Go(fn) }

// Offers reports whether the peer's latest cluster config lists folderID.
func (p *Peer) Offers(folderID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, wf := range p.lastCC.GetFolders() {
		if wf.GetId() == folderID {
			return true
		}
	}
	return false
}

// configured reports whether the peer has sent its cluster config.
func (p *Peer) configured() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastCC != nil
}

// ServeConn runs the protocol on an authenticated connection to peer until
// it ends or ctx is canceled.
func (r *Router) ServeConn(ctx context.Context, peer crypt.DeviceID, rw io.ReadWriteCloser) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &Peer{ID: peer, ctx: ctx}
	p.Conn = protocol.NewConn(protocol.DeviceID(peer), rw, r, protocol.Options{})
	r.mu.Lock()
	if old := r.peers[peer]; old != nil {
		old.Conn.Close("replaced by a new connection")
	}
	r.peers[peer] = p
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.peers[peer] == p {
			delete(r.peers, peer)
		}
		r.mu.Unlock()
		r.trusted.Closed(p)
		r.backup.Closed(p)
	}()
	errc := make(chan error, 1)
	go func() { errc <- p.Conn.Serve(ctx) }()
	r.sendClusterConfig(ctx, p)
	err := <-errc
	cancel()
	p.wg.Wait()
	if r.recv != nil {
		r.recv.Closed(p.Conn)
	}
	return err
}

// peer returns the live connection to a device, or nil.
func (r *Router) peer(id crypt.DeviceID) *Peer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peers[id]
}

func (r *Router) allPeers() []*Peer {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Peer, 0, len(r.peers))
	for _, p := range r.peers {
		out = append(out, p)
	}
	return out
}

// Connected reports whether a device has a live connection.
func (r *Router) Connected(id crypt.DeviceID) bool { return r.peer(id) != nil }

// ErrNotConnected means the device has no live connection.
var ErrNotConnected = errors.New("not connected")

// RequestPeer sends a request to a connected device.
func (r *Router) RequestPeer(ctx context.Context, id crypt.DeviceID, req *protocol.Request) ([]byte, error) {
	p := r.peer(id)
	if p == nil {
		return nil, ErrNotConnected
	}
	return p.Conn.Request(ctx, req)
}

// WaitPeer waits up to d for a connection to id whose cluster config has
// arrived, and returns it, or nil.
func (r *Router) WaitPeer(ctx context.Context, id crypt.DeviceID, d time.Duration) *Peer {
	deadline := time.Now().Add(d)
	for {
		if p := r.peer(id); p != nil && p.configured() {
			return p
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Refresh tells every connected peer the node's configuration, after it
// changed, and acts on each peer's latest cluster config again (a folder
// shared here after the peer announced it starts syncing at once).
func (r *Router) Refresh(ctx context.Context) {
	if r.recv != nil {
		if err := r.recv.Reload(ctx); err != nil {
			r.log.Warn("loading encrypted folders", "err", err)
		}
	}
	for _, p := range r.allPeers() {
		r.sendClusterConfig(ctx, p)
		if err := r.reconcile(p); err != nil {
			r.log.Warn("applying peer's folders", "device", p.ID.String(), "err", err)
		}
	}
}

// Announce sends a new cluster config to the connected trusted peers that
// share folderID, when something they act on changed (its polynomial was
// fixed).
func (r *Router) Announce(ctx context.Context, folderID string) {
	for _, p := range r.allPeers() {
		if shared, untrusted := r.trusted.Shares(folderID, p.ID); shared && !untrusted {
			r.sendClusterConfig(ctx, p)
		}
	}
}

// sendClusterConfig tells the peer which folders this node shares with it
// and how much of whose index each side has.
func (r *Router) sendClusterConfig(ctx context.Context, p *Peer) {
	cc := &protocol.ClusterConfig{}
	cc.Folders = append(cc.Folders, r.trusted.ClusterFolders(ctx, p.ID)...)
	cc.Folders = append(cc.Folders, r.backup.ClusterFolders(ctx, p.ID)...)
	if r.recv != nil {
		cc.Folders = append(cc.Folders, r.recv.ClusterFolders(ctx, p.ID)...)
	}
	if err := p.Conn.ClusterConfig(ctx, cc); err != nil && ctx.Err() == nil {
		r.log.Debug("sending cluster config", "device", p.ID.String(), "err", err)
	}
}

// ClusterConfig handles the peer's folder list.
func (r *Router) ClusterConfig(wirePeer protocol.DeviceID, cc *protocol.ClusterConfig) error {
	p := r.peer(crypt.DeviceID(wirePeer))
	if p == nil {
		return errors.New("cluster config from a peer without a connection")
	}
	p.mu.Lock()
	p.lastCC = cc
	p.freshCC = true
	p.mu.Unlock()
	return r.reconcile(p)
}

// reconcile gives each entry of the peer's latest cluster config to its
// handler, records offers of folders this node does not share with the
// peer, and stops what runs for folders the peer no longer offers.
func (r *Router) reconcile(p *Peer) error {
	p.reconcileMu.Lock()
	defer p.reconcileMu.Unlock()
	p.mu.Lock()
	cc, fresh := p.lastCC, p.freshCC
	p.freshCC = false
	p.mu.Unlock()
	if cc == nil {
		return nil
	}
	ctx := p.ctx
	offered := map[string]bool{}
	for _, wf := range cc.GetFolders() {
		id := wf.GetId()
		if r.recv != nil && r.recv.Holds(id) && r.sharesHeld(ctx, id, p.ID) {
			if err := r.recv.ClusterConfig(ctx, p.Conn, wf); err != nil {
				return err
			}
			continue
		}
		shared, untrusted := r.trusted.Shares(id, p.ID)
		switch {
		case !shared:
			r.recordOffer(ctx, p.ID, wf)
			continue
		case untrusted:
			if err := r.backup.Reconcile(p, wf, fresh); err != nil {
				return err
			}
		default:
			if err := r.trusted.Reconcile(p, wf); err != nil {
				return err
			}
			r.backup.TrustedPeer(p)
		}
		offered[id] = true
	}
	r.trusted.Stop(p, offered)
	r.backup.Stop(p, offered)
	return nil
}

// recordOffer keeps a peer's offer of a folder this node does not share
// with it, for the user to accept. A folder shared with the peer in the
// configuration is no offer, though it does not run yet (a connection
// can come before the engine has started its folders): listing it would
// invite the user to accept their own folder.
func (r *Router) recordOffer(ctx context.Context, peer crypt.DeviceID, wf *protocol.Folder) {
	if r.sharesHeld(ctx, wf.GetId(), peer) {
		return
	}
	err := r.db.AddPendingFolder(ctx, db.PendingFolder{DeviceID: peer.String(), FolderID: wf.GetId(), Label: wf.GetLabel(), FirstSeen: time.Now(), Encrypted: offeredEncrypted(wf, r.id)})
	switch {
	case err == nil:
		r.log.Info("folder offered by device", "folder", wf.GetId(), "device", peer.String())
		r.events.Publish(events.PendingChanged{Device: peer.String(), Folder: wf.GetId()})
	case !errors.Is(err, db.ErrConstraint):
		r.log.Warn("recording folder offer", "folder", wf.GetId(), "err", err)
	}
}

// offeredEncrypted reports whether a folder offer lists self as an
// untrusted receiver of it.
func offeredEncrypted(wf *protocol.Folder, self crypt.DeviceID) bool {
	for _, d := range wf.GetDevices() {
		if string(d.GetDeviceId()) == string(self[:]) {
			return d.GetEncrypted()
		}
	}
	return false
}

// sharesHeld reports whether a folder of this node's configuration is
// shared with peer.
func (r *Router) sharesHeld(ctx context.Context, folderID string, peer crypt.DeviceID) bool {
	devs, err := r.db.FolderDevices(ctx, folderID)
	if err != nil {
		return false
	}
	return slices.Contains(devs, peer.String())
}

// Index handles a peer's full index of a folder.
func (r *Router) Index(peer protocol.DeviceID, idx *protocol.Index) error {
	return r.index(crypt.DeviceID(peer), idx.GetFolder(), idx.GetFiles())
}

// IndexUpdate handles a peer's index changes.
func (r *Router) IndexUpdate(peer protocol.DeviceID, idx *protocol.IndexUpdate) error {
	return r.index(crypt.DeviceID(peer), idx.GetFolder(), idx.GetFiles())
}

func (r *Router) index(peer crypt.DeviceID, folderID string, files []*protocol.FileInfo) error {
	shared, untrusted := r.trusted.Shares(folderID, peer)
	if untrusted {
		return fmt.Errorf("plaintext index of %s from an untrusted receiver", folderID)
	}
	p := r.peer(peer)
	if !shared || p == nil {
		// Not an error: the configuration may have changed in flight.
		r.log.Debug("index for a folder not shared with the peer", "folder", folderID, "device", peer.String())
		return nil
	}
	return r.trusted.Index(p, folderID, files)
}

// Request serves a block of a local file to a trusted peer, a sealed
// chunk to a receiver of a folder, or, on a receiver, what it holds.
func (r *Router) Request(ctx context.Context, wirePeer protocol.DeviceID, req *protocol.Request) ([]byte, error) {
	peer := crypt.DeviceID(wirePeer)
	if r.recv != nil && r.recv.Holds(req.GetFolder()) {
		return r.recv.Request(ctx, peer, req)
	}
	shared, untrusted := r.trusted.Shares(req.GetFolder(), peer)
	if !shared {
		return nil, protocol.ErrNoSuchFile
	}
	if untrusted {
		if req.GetKind() != protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK {
			return nil, protocol.ErrNoSuchFile // never plaintext to a receiver
		}
		p := r.peer(peer)
		if p == nil {
			return nil, protocol.ErrNoSuchFile
		}
		return r.backup.ServeChunk(p, req)
	}
	if req.GetKind() != protocol.RequestKind_REQUEST_KIND_FILE_BLOCK {
		return nil, protocol.ErrInvalidFile
	}
	return r.trusted.ServeBlock(req)
}

// Release takes back the buffer a Request returned, once sent.
func (r *Router) Release(data []byte) { protocol.Recycle(data) }

// SealedIndex takes sealed records: on a receiver, to store; on a trusted
// device, a receiver's log to open.
func (r *Router) SealedIndex(wirePeer protocol.DeviceID, idx *protocol.SealedIndex) error {
	p := r.peer(crypt.DeviceID(wirePeer))
	if p == nil {
		return errors.New("sealed index from a peer without a connection")
	}
	if r.recv != nil && r.recv.Holds(idx.GetFolder()) {
		return r.recv.SealedIndex(p.Conn, idx)
	}
	if _, untrusted := r.trusted.Shares(idx.GetFolder(), p.ID); !untrusted {
		r.log.Debug("sealed index for a folder not shared with the receiver", "folder", idx.GetFolder(), "device", p.ID.String())
		return nil
	}
	return r.backup.SealedIndex(p, idx)
}

// SealedAck takes a peer's acknowledgement of sealed records.
func (r *Router) SealedAck(wirePeer protocol.DeviceID, ack *protocol.SealedAck) error {
	p := r.peer(crypt.DeviceID(wirePeer))
	if p == nil {
		return nil
	}
	if r.recv != nil && r.recv.Holds(ack.GetFolder()) {
		return r.recv.SealedAck(p.Conn, ack)
	}
	r.backup.SealedAck(p, ack)
	return nil
}

// ReceiverClaims takes a trusted peer's notes about receivers.
func (r *Router) ReceiverClaims(wirePeer protocol.DeviceID, rc *protocol.ReceiverClaims) error {
	p := r.peer(crypt.DeviceID(wirePeer))
	if p == nil {
		return nil
	}
	return r.backup.ReceiverClaims(p, rc)
}

// Closed is called once when a connection ends.
func (r *Router) Closed(peer protocol.DeviceID, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		r.log.Debug("protocol connection closed", "device", crypt.DeviceID(peer).String(), "err", err)
	}
}

var (
	_ protocol.Model       = (*Router)(nil)
	_ protocol.SealedModel = (*Router)(nil)
	_ protocol.ClaimsModel = (*Router)(nil)
	_ protocol.Releaser    = (*Router)(nil)
)

// NewPeer returns a Peer for a connection served by other means than
// ServeConn, whose handlers' calls end with ctx: for a handler's tests,
// or a tool speaking to one device.
func NewPeer(ctx context.Context, id crypt.DeviceID, conn *protocol.Conn) *Peer {
	return &Peer{ID: id, Conn: conn, ctx: ctx}
}
