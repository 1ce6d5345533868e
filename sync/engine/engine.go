// Package engine is trusted two-way sync: it scans local changes into the
// index, exchanges indexes with trusted peers, and pulls what the global
// state says this node needs.
//
// The router (sync/router) hands it the messages of folders shared with
// trusted peers; each folder runs one goroutine that serialises its scans
// and pulls, so a file is never scanned and replaced at the same time.
// Peers' messages arrive on connection reader goroutines and only touch
// the index (which is safe for concurrent use) and wake the folder. The
// sending side of encrypted shares (sync/backup) uses the running folders
// through Folder handles, and the puller fetches from receivers through
// it (Options.Sealed).
//
// Invariants:
//   - Nothing from a peer reaches the disk without passing index.FromWire (names,
//     block layout) and, for content, a hash check of every block.
//   - A local file is replaced or deleted only if it still matches the
//     local index (else it is rescanned and the change becomes a conflict).
//   - Files are written to a temp file beside the target and renamed into
//     place after a durability barrier; a crash leaves only temp files,
//     which are cleaned up.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/scan"
)

// Engine runs a node's folders and talks to its peers about them.
type Engine struct {
	id    crypt.DeviceID
	db    *db.DB
	log   *slog.Logger
	opts  Options
	ready chan struct{}

	mu      sync.Mutex
	ctx     context.Context // Serve's; set before ready closes
	folders map[string]*folder
	stops   map[string]context.CancelFunc
	// failed holds why each folder that should run could not start, until
	// a Reload starts it: status shows it, where the folder would
	// otherwise look as if it were still starting.
	failed map[string]string
	links  map[crypt.DeviceID]*link
	wg     sync.WaitGroup

	// started, when set (tests), is called with each folder Reload
	// started, once others can see it.
	started func(folderID string)
}

// Network is how the engine reaches its peers (sync/router).
type Network interface {
	Connected(peer crypt.DeviceID) bool
	RequestPeer(ctx context.Context, peer crypt.DeviceID, req *protocol.Request) ([]byte, error)
	// Refresh tells every peer the configuration, after Reload changed it.
	Refresh(ctx context.Context)
	// Announce tells the trusted peers sharing folderID its new entry.
	Announce(ctx context.Context, folderID string)
}

// Sealed fetches blocks from a folder's untrusted receivers (sync/backup).
type Sealed interface {
	// SealedBlock returns the block's plaintext, opened and checked
	// against its hash, to give back with protocol.Recycle.
	SealedBlock(ctx context.Context, folderID string, peer crypt.DeviceID, b index.Block) ([]byte, error)
}

// Options tune an Engine.
type Options struct {
	// Workers is the number of files pulled at once (default 16: small
	// files are bound by round trips and file system calls, not bandwidth).
	Workers int
	// RescanInterval is the full rescan period (default 1 h).
	RescanInterval time.Duration
	// WatchDelay is how long the watcher gathers events (default 50 ms).
	WatchDelay time.Duration
	// Net reaches the peers; Sealed fetches from receivers. Both must be
	// set before Serve.
	Net    Network
	Sealed Sealed
	// Events receives folder states, pulled items and conflicts; nil
	// publishes none.
	Events *events.Bus
}

// New returns an engine for the node id with its database.
func New(id crypt.DeviceID, database *db.DB, log *slog.Logger, opts Options) *Engine {
	if opts.Workers <= 0 {
		opts.Workers = 16
	}
	if opts.RescanInterval <= 0 {
		opts.RescanInterval = time.Hour
	}
	if opts.WatchDelay <= 0 {
		opts.WatchDelay = scan.DefaultDelay
	}
	return &Engine{
		id: id, db: database, log: log, opts: opts,
		ready:   make(chan struct{}),
		folders: map[string]*folder{},
		stops:   map[string]context.CancelFunc{},
		failed:  map[string]string{},
		links:   map[crypt.DeviceID]*link{},
	}
}

// SetSealed sets Options.Sealed, for a Sealed made after the engine (it
// needs the engine's folders). Call it before Serve.
func (e *Engine) SetSealed(s Sealed) { e.opts.Sealed = s }

// Serve starts the configured folders and runs until ctx ends.
func (e *Engine) Serve(ctx context.Context) error {
	e.mu.Lock()
	e.ctx = ctx
	e.mu.Unlock()
	close(e.ready)
	if err := e.Reload(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	e.wg.Wait()
	return nil
}

// Reload brings the running folders in line with the database: it starts
// new folders, stops removed ones, restarts changed ones and tells every
// connected peer the new configuration.
func (e *Engine) Reload(ctx context.Context) error {
	<-e.ready
	cfgs, err := e.db.Folders(ctx)
	if err != nil {
		return err
	}
	want := map[string]db.Folder{}
	for _, f := range cfgs {
		// An encrypted folder is the receiver's, not synced here; a paused
		// one does not run: no scans, no pulls, nothing sent or served.
		if f.Type != db.Encrypted && !f.Paused {
			want[f.ID] = f
		}
	}
	e.mu.Lock()
	base := e.ctx
	var started []*folder
	clear(e.failed)
	for id, f := range e.folders {
		cfg, ok := want[id]
		if cur := f.config(); !ok || cfg.Path != cur.Path || cfg.Type != cur.Type {
			e.stops[id]()
			delete(e.folders, id)
			delete(e.stops, id)
		}
	}
	for id, cfg := range want {
		if f, ok := e.folders[id]; ok {
			f.setConfig(cfg)
			continue
		}
		f, err := newFolder(ctx, e, cfg)
		if err != nil {
			e.log.Error("starting folder", "folder", id, "err", err)
			e.failed[id] = "starting the folder: " + err.Error()
			continue
		}
		// Its shares are known before anything can see it: a peer's
		// cluster config handled in between would take the folder for an
		// offer and never send or take its index on that connection.
		if err := f.refreshShares(ctx); err != nil {
			e.log.Warn("reading folder shares", "folder", f.id, "err", err)
		}
		fctx, stop := context.WithCancel(base)
		e.folders[id] = f
		e.stops[id] = stop
		started = append(started, f)
		e.wg.Go(func() { f.serve(fctx) })
	}
	e.mu.Unlock()
	if e.started != nil {
		for _, f := range started {
			e.started(f.id)
		}
	}
	e.opts.Net.Refresh(ctx)
	return nil
}

func (e *Engine) folder(id string) *folder {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.folders[id]
}

// runningFolders lists the running folders.
func (e *Engine) runningFolders() []*folder {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*folder, 0, len(e.folders))
	for _, f := range e.folders {
		out = append(out, f)
	}
	return out
}

// Scan asks a folder for an immediate full rescan.
func (e *Engine) Scan(folderID string) error {
	f := e.folder(folderID)
	if f == nil {
		return e.notRunning(context.Background(), folderID)
	}
	f.requestScan(nil)
	return nil
}

// AllowDeletes lets a folder that stopped before a mass deletion go on.
func (e *Engine) AllowDeletes(folderID string) error {
	f := e.folder(folderID)
	if f == nil {
		return fmt.Errorf("%w: folder %q", db.ErrNotFound, folderID)
	}
	f.allowDeletes()
	return nil
}

// indexID returns the random ID of this node's index of a folder, creating
// it on first use. A new ID (a reset database) makes peers send everything
// again and forget what they had of this node.
func (e *Engine) indexID(ctx context.Context, folderID string) (uint64, error) {
	id, err := e.db.IndexID(ctx, folderID)
	if !errors.Is(err, db.ErrNotFound) {
		return id, err
	}
	var b [8]byte
	rand.Read(b[:])
	id = binary.BigEndian.Uint64(b[:]) | 1
	return id, e.db.SetIndexID(ctx, folderID, id)
}

// peerIndexID is the index ID a peer last announced for a folder, 0 if none.
func (e *Engine) peerIndexID(ctx context.Context, folderID string, peer crypt.DeviceID) uint64 {
	id, err := e.db.PeerIndexID(ctx, folderID, peer.String())
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		e.log.Warn("reading a peer's index ID", "folder", folderID, "device", peer.String(), "err", err)
	}
	return id
}

func (e *Engine) setPeerIndexID(ctx context.Context, folderID string, peer crypt.DeviceID, id uint64) error {
	return e.db.SetPeerIndexID(ctx, folderID, peer.String(), id)
}
