// Package backup is the sending side of encrypted shares: what a trusted
// device does for a folder it shares with an untrusted receiver. It
// mirrors sync/receiver, which stores what this package sends.
//
// A folder shared with a receiver sends it sealed records of its local
// index (sync/sealed; counter = local sequence) with the small chunks
// inline, and serves the sealed chunks the receiver asks for. The
// receiver's record log comes back as SealedIndex messages, which are
// opened, checked and kept as the receiver's index of the folder (so the
// receiver counts as a device that has files, and trusted sync's puller
// fetches from it through SealedBlock). The folder key lives on the
// receiver in a password envelope (Share).
//
// Invariants:
//   - Nothing a receiver sends is used unopened: every record passes
//     sealed.Open and every chunk opens under the folder key, which checks
//     its plaintext against the block's hash. What fails is counted as
//     tampered, shown in Status, and never used.
//   - Plaintext never goes to a receiver: a chunk is read, checked against
//     the hash of the record that named it, and sealed before it is sent.
//   - A receiver never serves less than this device has seen from it: a
//     log or held counter that went back is refused as ErrRollback, and a
//     fork of its log is found when trusted devices compare notes
//     (fork.go).
//
// Backup holds no folder itself: trusted sync (sync/engine) runs the
// folders and hands them over through the Folder interface.
package backup

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/router"
)

// Folder is a running trusted folder, as backup needs it.
type Folder interface {
	ID() string
	Log() *slog.Logger
	// Index is the folder's index: its local records, and each
	// receiver's records as this device opened them.
	Index() *index.Set
	// Root is the folder's directory.
	Root() *fsys.Root
	// ReadBlock reads size bytes of a local file at offset, into a buffer
	// to give back with protocol.Recycle.
	ReadBlock(name string, offset int64, size uint32) ([]byte, error)
	// Polynomial is the folder's chunking polynomial.
	Polynomial(ctx context.Context) (uint64, error)
	// IndexChanged returns a channel closed at the next local index change.
	IndexChanged() <-chan struct{}
	// RequestPull and RequestScan wake the folder's loop.
	RequestPull()
	RequestScan(paths []string)
	// Archive keeps the current file at name as a version before it is
	// replaced, when versioning is on.
	Archive(name string) error
	// Entry is the folder's own cluster config entry: ID, label, type,
	// and this device with its index ID and sequence.
	Entry(ctx context.Context) (*protocol.Folder, error)
	// SharedWith reports whether the folder is shared with dev, and
	// whether dev is an untrusted receiver of it.
	SharedWith(dev crypt.DeviceID) (shared, untrusted bool)
	// Receivers lists the folder's untrusted receivers.
	Receivers() []crypt.DeviceID
}

// Folders finds the running trusted folders (sync/engine).
type Folders interface {
	// Folder returns a running folder, or nil.
	Folder(id string) Folder
	// Each calls fn for every running folder.
	Each(fn func(Folder))
	// Reload brings the running folders and every peer in line with the
	// database, after a share changed it.
	Reload(ctx context.Context) error
}

// Network reaches connected peers (sync/router).
type Network interface {
	Connected(dev crypt.DeviceID) bool
	RequestPeer(ctx context.Context, dev crypt.DeviceID, req *protocol.Request) ([]byte, error)
	WaitPeer(ctx context.Context, dev crypt.DeviceID, d time.Duration) *router.Peer
}

// Options tune a Backup.
type Options struct {
	// Workers bounds the files a restore from receivers writes at once
	// (default 16).
	Workers int
	// NoCompression seals chunks for receivers without compressing them.
	// Compression saves their storage and upload, but a sealed chunk's
	// size then says how compressible it is (a text file from a random
	// one of the same size); without it a receiver learns each chunk's
	// size class only.
	NoCompression bool
}

// Backup runs the sending side of a node's encrypted shares. Safe for
// concurrent use.
type Backup struct {
	id      crypt.DeviceID
	db      *db.DB
	log     *slog.Logger
	folders Folders
	net     Network
	opts    Options

	claims claimSignal // a receiver served back more of this node's records

	mu     sync.Mutex
	shares map[string]*share        // by folder ID
	links  map[crypt.DeviceID]*link // by peer
}

// New returns the backup side of node id.
func New(id crypt.DeviceID, database *db.DB, log *slog.Logger, folders Folders, net Network, opts Options) *Backup {
	if opts.Workers <= 0 {
		opts.Workers = 16
	}
	return &Backup{id: id, db: database, log: log, folders: folders, net: net, opts: opts,
		shares: map[string]*share{}, links: map[crypt.DeviceID]*link{}}
}

// share is what backup keeps of one folder, across its restarts.
type share struct {
	id string

	keysMu    sync.Mutex
	keysCache *crypt.Keys // the folder key's subkeys, once loaded
	presealed presealed   // small chunks sealed while a share's scrypt ran

	forks forkWatch // peers' claims about receivers, to check

	mu       sync.Mutex
	recvErrs map[crypt.DeviceID]string // latest problem with each receiver
	forkErrs map[crypt.DeviceID]string // receivers found forking their log (fork.go)
	stalled  map[crypt.DeviceID]string // receivers taking no step with uploads
	// lacking holds, per receiver, the log sequence of the first record
	// sealed with a key this device lacks: its cursor stays before it.
	lacking map[crypt.DeviceID]int64

	// Since start: records and chunks from receivers that failed
	// verification.
	tamperedRecords, tamperedChunks atomic.Int64

	// The restore from receivers under way, for progress reports.
	restoring                       atomic.Bool
	restoreFiles, restoreFilesTotal atomic.Int64
	restoreBytes, restoreBytesTotal atomic.Int64
}

// share returns the state of folderID, made on first use.
func (b *Backup) share(folderID string) *share {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.shares[folderID]
	if s == nil {
		s = &share{id: folderID, recvErrs: map[crypt.DeviceID]string{}}
		b.shares[folderID] = s
	}
	return s
}

// link is what runs on one connection to a peer: uploads to it as a
// receiver of folders, or claims sent to it as a trusted peer.
type link struct {
	p *router.Peer

	mu       sync.Mutex
	senders  map[string]sender  // by folder ID
	uploads  map[string]*upload // by folder ID
	claiming bool               // sendClaims runs
}

// sender is a running upload.
type sender struct {
	f    Folder
	stop context.CancelFunc
}

// link returns the state of p's connection, made on first use; a new
// connection of the same peer replaces the old one's.
func (b *Backup) link(p *router.Peer) *link {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.links[p.ID]
	if l == nil || l.p != p {
		l = &link{p: p, senders: map[string]sender{}, uploads: map[string]*upload{}}
		b.links[p.ID] = l
	}
	return l
}

// upload returns the upload of folderID running on p, or nil.
func (b *Backup) upload(p *router.Peer, folderID string) *upload {
	b.mu.Lock()
	l := b.links[p.ID]
	b.mu.Unlock()
	if l == nil || l.p != p {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.uploads[folderID]
}

// Stop ends the uploads on p of folders not in keep.
func (b *Backup) Stop(p *router.Peer, keep map[string]bool) {
	l := b.link(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, s := range l.senders {
		if !keep[id] {
			s.stop()
			delete(l.senders, id)
			delete(l.uploads, id)
		}
	}
}

// Closed forgets p's connection.
func (b *Backup) Closed(p *router.Peer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.links[p.ID]; l != nil && l.p == p {
		delete(b.links, p.ID)
	}
}

// ReceiverStatus is how a receiver of a folder stands, for status.
type ReceiverStatus struct {
	// Error is the problem with the receiver: a fork of its log (which
	// stays until disproved), else the latest other one (rollback,
	// tampering, missing key), or "".
	Error string
}

// Status is a folder's encrypted shares, for status reports.
type Status struct {
	// TamperedRecords and TamperedChunks count, since the node started,
	// records and chunks from receivers that failed verification (never
	// used).
	TamperedRecords, TamperedChunks int64
	// Restoring: a restore from receivers is under way, this far.
	Restoring                                                        bool
	RestoreFiles, RestoreFilesTotal, RestoreBytes, RestoreBytesTotal int64
	// Receivers by device.
	Receivers map[crypt.DeviceID]ReceiverStatus
}

// Status reports folderID's encrypted shares.
func (b *Backup) Status(folderID string) Status {
	s := b.share(folderID)
	st := Status{TamperedRecords: s.tamperedRecords.Load(), TamperedChunks: s.tamperedChunks.Load(), Receivers: map[crypt.DeviceID]ReceiverStatus{}}
	if s.restoring.Load() {
		st.Restoring = true
		st.RestoreFiles, st.RestoreFilesTotal = s.restoreFiles.Load(), s.restoreFilesTotal.Load()
		st.RestoreBytes, st.RestoreBytesTotal = s.restoreBytes.Load(), s.restoreBytesTotal.Load()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for d := range s.recvErrs {
		st.Receivers[d] = ReceiverStatus{Error: s.receiverError(d)}
	}
	for d := range s.forkErrs {
		st.Receivers[d] = ReceiverStatus{Error: s.receiverError(d)}
	}
	for d := range s.stalled {
		st.Receivers[d] = ReceiverStatus{Error: s.receiverError(d)}
	}
	return st
}

// holdCursor notes seq (0: none) as a record of peer's log sealed with a
// key this device lacks, and returns the first such record noted since
// the key ring last changed (0: none).
func (s *share) holdCursor(peer crypt.DeviceID, seq int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > 0 {
		if s.lacking == nil {
			s.lacking = map[crypt.DeviceID]int64{}
		}
		if cur, ok := s.lacking[peer]; !ok || seq < cur {
			s.lacking[peer] = seq
		}
	}
	return s.lacking[peer]
}

// setReceiverError records the latest problem with a receiver for status.
func (s *share) setReceiverError(peer crypt.DeviceID, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.recvErrs, peer)
		return
	}
	s.recvErrs[peer] = err.Error()
}
