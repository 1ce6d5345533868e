package receiver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/sync/protocol"
)

var (
	// ErrNotHeld means the folder is not an encrypted folder of this node.
	ErrNotHeld = errors.New("folder is not held by this receiver")
	// ErrNotShared means the folder is not shared with the peer.
	ErrNotShared = errors.New("folder is not shared with the peer")
	// ErrFlowControl means a peer sent more SealedIndex messages than it
	// may have unacknowledged. It ends the connection.
	ErrFlowControl = errors.New("peer ignored flow control")
)

// Defaults of the batching and flow-control limits.
const (
	// maxQueued is how many SealedIndex messages a peer may have waiting
	// for its ingester.
	maxQueued = 16
	// defaultBatchBytes is about the largest SealedIndex the log sender
	// builds.
	defaultBatchBytes = protocol.MaxBatchSize
	// sendWindow is how many SealedIndex messages the log sender keeps
	// unacknowledged.
	sendWindow = 4
	// fetchParallel is how many chunk requests an ingester keeps in flight.
	fetchParallel = 16
	// readLimit is how many records the log sender reads at a time.
	readLimit = 1024
)

// Peer is a live connection to a device sharing an encrypted folder.
// *protocol.Conn satisfies it.
type Peer interface {
	Peer() protocol.DeviceID
	SealedIndex(ctx context.Context, idx *protocol.SealedIndex) error
	SealedAck(ctx context.Context, ack *protocol.SealedAck) error
	Request(ctx context.Context, req *protocol.Request) ([]byte, error)
}

// Receiver stores and serves the encrypted folders of one node. Create it
// with New and call Reload before anything else. Safe for concurrent use.
type Receiver struct {
	events *events.Bus // nil: none published
	self   crypt.DeviceID
	db     *db.DB
	store  blob.Store
	log    *slog.Logger

	batchBytes  atomic.Int64  // about the largest SealedIndex sent; tests lower it
	packBelow   atomic.Int64  // chunks shorter than this are packed; tests change it
	packTarget  atomic.Int64  // about the largest pack
	packs       *packCache    // nil: packs read by range, a chunk at a time
	packBufs    *packBuffers  // buffers of new packs (packer.bufs)
	packUploads chan struct{} // packer.uploads

	// storeKey, when set, opens folders stored opaquely; with opaqueNew,
	// folders loaded for the first time are stored so (SetStoreKey).
	storeKey  *crypt.StoreKey
	opaqueNew bool

	mu      sync.Mutex
	folders map[string]*folder
	links   map[linkKey]*link
}

// folder is one encrypted folder this node holds.
type folder struct {
	id    string
	fk    string
	label string
	logID uint64

	// append serialises the folder's appends, envelope puts, prunes and
	// meta writes.
	append sync.Mutex
	// collected counts the prunes that deleted chunks; an ingest that
	// sees it change before its commit starts over.
	collected atomic.Uint64
	// pending holds the IDs of the packs ingests are writing and have
	// yet to commit: garbage collection leaves them alone.
	pendingMu sync.Mutex
	pending   map[string]bool
	// failing holds why the ingests that cannot store fail, per link.
	failMu  sync.Mutex
	failing map[*link]StoreError

	// Guarded by Receiver.mu:
	shared map[crypt.DeviceID]bool
	meta   []byte        // the meta object last written or found in the store
	wake   chan struct{} // closed, and replaced, at every append
}

// SetStoreKey gives the receiver the home's store key: folders stored
// under a segment it made (crypt.StoreKey) open with it, and with
// opaqueNew a folder this receiver starts holding is stored so, its ID
// and meta hidden from whoever reads the store. A folder keeps the
// segment it was first given (the database records it). Call it before
// Reload.
func (r *Receiver) SetStoreKey(key crypt.StoreKey, opaqueNew bool) {
	r.storeKey, r.opaqueNew = &key, opaqueNew
}

// segment returns where the store keeps folderID, choosing it on the
// folder's first load.
func (r *Receiver) segment(ctx context.Context, folderID string) (string, error) {
	seg, err := r.db.ReceiverSegment(ctx, folderID)
	if errors.Is(err, db.ErrNotFound) {
		want := folderKey(folderID)
		if r.opaqueNew && r.storeKey != nil {
			want = r.storeKey.Segment(folderID)
		}
		seg, err = r.db.InitReceiverSegment(ctx, folderID, want)
	}
	if err != nil {
		return "", err
	}
	if opaque(seg) && (r.storeKey == nil || r.storeKey.Segment(folderID) != seg) {
		return "", fmt.Errorf("folder %q: %w", folderID, ErrNoStoreKey)
	}
	return seg, nil
}

// SetEvents makes the receiver publish its ingest's progress on bus.
// Call it before Reload.
func (r *Receiver) SetEvents(bus *events.Bus) { r.events = bus }

// New returns a Receiver for the encrypted folders in database, storing
// chunks, logs and envelopes in store. It does nothing until Reload.
func New(self crypt.DeviceID, database *db.DB, store blob.Store, log *slog.Logger) *Receiver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Receiver{
		self: self, db: database, store: store, log: log,
		folders: make(map[string]*folder),
		links:   make(map[linkKey]*link),
	}
	r.batchBytes.Store(defaultBatchBytes)
	r.packBelow.Store(defaultPackBelow)
	r.packTarget.Store(defaultPackTarget)
	return r
}

// Reload re-reads the encrypted folders and their shares from the
// database (called at start and after every configuration change); it
// creates a folder's log ID the first time, and writes the folder's meta
// object to the store when it changed. Ingesters and log senders of
// folders no longer held, or no longer shared with their peer, are
// stopped. A folder that fails to load is logged and left out; the error
// returned is the first such failure.
func (r *Receiver) Reload(ctx context.Context) error {
	all, err := r.db.Folders(ctx)
	if err != nil {
		return fmt.Errorf("reloading receiver folders: %w", err)
	}
	devices, err := r.db.Devices(ctx)
	if err != nil {
		return fmt.Errorf("reloading receiver folders: %w", err)
	}
	byID := make(map[string]db.Device, len(devices))
	for _, d := range devices {
		byID[d.ID] = d
	}
	var first error
	next := make(map[string]*folder)
	for _, f := range all {
		if f.Type != db.Encrypted {
			continue
		}
		nf, err := r.load(ctx, f, byID)
		if err != nil {
			r.log.Error("loading encrypted folder", "folder", f.ID, "err", err)
			if first == nil {
				first = err
			}
			continue
		}
		next[f.ID] = nf
	}

	r.mu.Lock()
	var stop []*link
	for id, nf := range next {
		if old, ok := r.folders[id]; ok && old.logID == nf.logID {
			// Keep the running folder (its lock and wake channel).
			old.label, old.shared, old.meta = nf.label, nf.shared, nf.meta
			next[id] = old
		}
	}
	r.folders = next
	for k, l := range r.links {
		if f, ok := next[k.folder]; !ok || f != l.folder || !f.shared[crypt.DeviceID(k.peer.Peer())] {
			stop = append(stop, l)
			delete(r.links, k)
		}
	}
	r.mu.Unlock()
	for _, l := range stop {
		l.stop()
	}
	return first
}

// load reads one encrypted folder, creating its log ID and writing its
// meta object when needed.
func (r *Receiver) load(ctx context.Context, f db.Folder, devices map[string]db.Device) (*folder, error) {
	fk, err := r.segment(ctx, f.ID)
	if err != nil {
		return nil, err
	}
	if err := blob.ValidKey(metaKey(fk)); err != nil {
		return nil, fmt.Errorf("folder ID too long for the store: %w", err)
	}
	logID, err := r.db.InitReceiverLog(ctx, f.ID, newLogID())
	if err != nil {
		return nil, err
	}
	ids, err := r.db.FolderDevices(ctx, f.ID)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	old := r.folders[f.ID]
	r.mu.Unlock()
	if old != nil {
		// Meta writes of a running folder are serialised by its lock.
		old.append.Lock()
		defer old.append.Unlock()
	}
	policy, err := r.db.ReceiverRetention(ctx, f.ID)
	if err != nil {
		return nil, err
	}
	hw, err := r.db.ReceiverHighWater(ctx, f.ID)
	if err != nil {
		return nil, err
	}
	nf := &folder{id: f.ID, fk: fk, label: f.Label, logID: logID,
		shared: make(map[crypt.DeviceID]bool), wake: make(chan struct{})}
	m := meta{ID: f.ID, Label: f.Label, Path: f.Path, LogID: logID, Devices: []metaDevice{},
		Retention: metaRetentionOf(Policy(policy)), HighWater: metaHighWaterOf(hw)}
	for _, s := range ids {
		id, err := crypt.ParseDeviceID(s)
		if err != nil {
			r.log.Warn("encrypted folder shared with an unparsable device ID", "folder", f.ID, "device", s)
			continue
		}
		d := devices[s]
		nf.shared[id] = true
		m.Devices = append(m.Devices, metaDevice{ID: id, Name: d.Name, Addresses: d.Addresses, Untrusted: d.Untrusted})
	}
	nf.meta = m.encode()

	var known []byte
	if old != nil {
		known = old.metaCopy(r)
	}
	if known == nil {
		// First load in this process: take back records whose commit the
		// database lost, and compare the meta with what the store holds.
		if err := r.replayTail(ctx, f.ID, fk); err != nil {
			return nil, err
		}
		known, err = getLimited(ctx, r.store, metaKey(fk), maxMetaSize)
		if err != nil && !errors.Is(err, blob.ErrNotExist) {
			return nil, fmt.Errorf("reading meta: %w", err)
		}
		if crypt.IsSealedMeta(known) && r.storeKey != nil {
			// Compared as plain: each sealing has a nonce of its own.
			if plain, err := r.storeKey.OpenMeta(fk, known); err == nil {
				known = plain
			}
		}
	}
	if !bytes.Equal(known, nf.meta) {
		data, err := metaForStore(fk, nf.meta, r.storeKey)
		if err != nil {
			return nil, err
		}
		if err := r.store.Put(ctx, metaKey(fk), bytes.NewReader(data), int64(len(data))); err != nil {
			return nil, fmt.Errorf("writing meta: %w", err)
		}
	}
	return nf, nil
}

// newLogID returns a random, non-zero log ID.
func newLogID() uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// Holds reports whether folderID is an encrypted folder of this node.
func (r *Receiver) Holds(folderID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.folders[folderID]
	return ok
}

// lookup returns the folder if it is held and shared with peer.
func (r *Receiver) lookup(folderID string, peer crypt.DeviceID) (*folder, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.folders[folderID]
	if !ok {
		return nil, fmt.Errorf("folder %q: %w", folderID, ErrNotHeld)
	}
	if !f.shared[peer] {
		return nil, fmt.Errorf("folder %q, device %v: %w", folderID, peer, ErrNotShared)
	}
	return f, nil
}

// ClusterFolders returns this node's encrypted folders shared with peer,
// as ClusterConfig entries (type ENCRYPTED, polynomial 0): a FolderDevice
// for this node (index_id = log ID, max_sequence = log's highest
// sequence, encrypted) and one per device sharing the folder
// (max_sequence = highest counter held with that origin, 0 if none;
// encrypted=false). Folders whose figures cannot be read are logged and
// left out.
func (r *Receiver) ClusterFolders(ctx context.Context, peer crypt.DeviceID) []*protocol.Folder {
	r.mu.Lock()
	var held []*folder
	for _, f := range r.folders {
		if f.shared[peer] {
			held = append(held, f)
		}
	}
	r.mu.Unlock()
	var out []*protocol.Folder
	for _, f := range held {
		wf, err := r.clusterFolder(ctx, f)
		if err != nil {
			r.log.Error("describing encrypted folder", "folder", f.id, "err", err)
			continue
		}
		out = append(out, wf)
	}
	sortFolders(out)
	return out
}

// clusterFolder describes f for a ClusterConfig.
func (r *Receiver) clusterFolder(ctx context.Context, f *folder) (*protocol.Folder, error) {
	seq, err := r.db.ReceiverLastSequence(ctx, f.id)
	if err != nil {
		return nil, err
	}
	maxCounter, err := r.maxCounters(ctx, f.id)
	if err != nil {
		return nil, err
	}
	m, err := parseMeta(f.fk, f.metaCopy(r), r.storeKey)
	if err != nil {
		return nil, err
	}
	wf := &protocol.Folder{Id: f.id, Label: m.Label, Type: protocol.FolderType_FOLDER_TYPE_ENCRYPTED}
	wf.Devices = append(wf.Devices, &protocol.FolderDevice{
		DeviceId: r.self[:], IndexId: f.logID, MaxSequence: seq, Encrypted: true})
	for _, d := range m.Devices {
		wf.Devices = append(wf.Devices, &protocol.FolderDevice{
			DeviceId: bytes.Clone(d.ID[:]), Name: d.Name, Addresses: d.Addresses,
			MaxSequence: int64(maxCounter[d.ID])})
	}
	return wf, nil
}

// maxCounters returns the highest counter held per origin: of the
// records and of the high-water marks pruning left.
func (r *Receiver) maxCounters(ctx context.Context, folderID string) (map[crypt.DeviceID]uint64, error) {
	origins, err := r.db.SealedOrigins(ctx, folderID)
	if err != nil {
		return nil, err
	}
	hw, err := r.db.ReceiverHighWater(ctx, folderID)
	if err != nil {
		return nil, err
	}
	out := make(map[crypt.DeviceID]uint64, len(origins)+len(hw.Counters))
	for _, o := range origins {
		out[crypt.DeviceID(o.Origin)] = o.MaxCounter
	}
	for _, c := range hw.Counters {
		id := crypt.DeviceID(c.Origin)
		out[id] = max(out[id], c.Counter)
	}
	return out, nil
}

// metaCopy returns f's meta object, read under r.mu.
func (f *folder) metaCopy(r *Receiver) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f.meta
}

// Closed forgets the connection p and waits for its ingesters and log
// senders to end (they end with the connection's context anyway).
func (r *Receiver) Closed(p Peer) {
	r.mu.Lock()
	var stop []*link
	for k, l := range r.links {
		if k.peer == p {
			stop = append(stop, l)
			delete(r.links, k)
		}
	}
	r.mu.Unlock()
	for _, l := range stop {
		l.stop()
	}
}

// Status is a folder's storage figures.
type Status struct {
	Records         int64   // sealed records held (all versions)
	Files           int64   // distinct file keys
	Chunks          int64   // distinct sealed chunks stored
	StoredBytes     int64   // bytes of sealed chunks stored
	ReferencedBytes int64   // bytes the records reference, counting every reference (before dedup)
	DedupRatio      float64 // ReferencedBytes / StoredBytes (0 when nothing stored)
	LogSequence     int64
	Origins         []OriginStatus // per device that sealed records
}

// OriginStatus is what a folder holds from one device that sealed records.
type OriginStatus struct {
	Device     crypt.DeviceID
	MaxCounter uint64
	LastStored time.Time
}

// Status reports a folder's storage figures, or ErrNotHeld. While an
// ingest of the folder cannot store what a peer sends (this node's store
// or database fails; it retries), Status returns the figures together
// with that failure, a *StoreError (the oldest, if several), matching
// ErrCannotStore; the error goes once the ingest stores again or its
// connection ends.
func (r *Receiver) Status(ctx context.Context, folderID string) (Status, error) {
	f, err := r.held(folderID)
	if err != nil {
		return Status{}, err
	}
	s, err := r.db.ReceiverStats(ctx, folderID)
	if err != nil {
		return Status{}, err
	}
	origins, err := r.db.SealedOrigins(ctx, folderID)
	if err != nil {
		return Status{}, err
	}
	seq, err := r.db.ReceiverLastSequence(ctx, folderID)
	if err != nil {
		return Status{}, err
	}
	out := Status{Records: s.Records, Files: s.Files, Chunks: s.Chunks, StoredBytes: s.StoredBytes,
		ReferencedBytes: s.ReferencedBytes, LogSequence: max(s.LogSequence, seq)}
	if s.StoredBytes > 0 {
		out.DedupRatio = float64(s.ReferencedBytes) / float64(s.StoredBytes)
	}
	for _, o := range origins {
		out.Origins = append(out.Origins, OriginStatus{Device: crypt.DeviceID(o.Origin), MaxCounter: o.MaxCounter, LastStored: o.LastStored})
	}
	if se := f.failure(); se != nil {
		return out, se
	}
	return out, nil
}
