package receiver

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/blob/local"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// waitTimeout bounds every wait for a state in these tests.
const waitTimeout = 10 * time.Second

const folderID = "f"

// node is a receiver with its database and store.
type node struct {
	id    crypt.DeviceID
	db    *db.DB
	store blob.Store
	r     *Receiver
}

func randomID() crypt.DeviceID {
	var id crypt.DeviceID
	_, _ = rand.Read(id[:])
	return id
}

func openDB(t *testing.T) *db.DB {
	t.Helper()
	d, err := db.Open(filepath.Join(t.TempDir(), "lockstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func localStore(t *testing.T) blob.Store {
	t.Helper()
	s, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newNode makes a receiver holding folderID, shared with peers.
func newNode(t *testing.T, store blob.Store, peers ...crypt.DeviceID) *node {
	t.Helper()
	ctx := context.Background()
	n := &node{id: randomID(), db: openDB(t), store: store}
	if err := n.db.PutFolder(ctx, db.Folder{ID: folderID, Label: "Docs", Path: "/srv/f", Type: db.Encrypted}); err != nil {
		t.Fatal(err)
	}
	n.r = New(n.id, n.db, store, nil)
	for _, p := range peers {
		n.share(t, p)
	}
	if err := n.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// share shares folderID with device p (not reloading).
func (n *node) share(t *testing.T, p crypt.DeviceID) {
	t.Helper()
	ctx := context.Background()
	if err := n.db.PutDevice(ctx, db.Device{ID: p.String(), Name: "dev-" + p.String()[:4],
		Addresses: []string{"tcp://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	if err := n.db.ShareFolder(ctx, folderID, p.String()); err != nil {
		t.Fatal(err)
	}
}

// engine is the test's stand-in for the sync engine on a receiver's side
// of one connection: it hands every encrypted-folder message to the
// Receiver, as the engine does.
type engine struct {
	r    *Receiver
	ctx  context.Context // the connection's
	conn *protocol.Conn
}

func (e *engine) ClusterConfig(_ protocol.DeviceID, cc *protocol.ClusterConfig) error {
	for _, wf := range cc.GetFolders() {
		if !e.r.Holds(wf.GetId()) {
			continue
		}
		if err := e.r.ClusterConfig(e.ctx, e.conn, wf); err != nil && !errors.Is(err, ErrNotShared) {
			return err
		}
	}
	return nil
}
func (e *engine) Index(protocol.DeviceID, *protocol.Index) error {
	return errors.New("unexpected index")
}
func (e *engine) IndexUpdate(protocol.DeviceID, *protocol.IndexUpdate) error {
	return errors.New("unexpected index update")
}
func (e *engine) Request(ctx context.Context, peer protocol.DeviceID, req *protocol.Request) ([]byte, error) {
	return e.r.Request(ctx, crypt.DeviceID(peer), req)
}
func (e *engine) Closed(protocol.DeviceID, error) { e.r.Closed(e.conn) }
func (e *engine) SealedIndex(_ protocol.DeviceID, idx *protocol.SealedIndex) error {
	return e.r.SealedIndex(e.conn, idx)
}
func (e *engine) SealedAck(_ protocol.DeviceID, ack *protocol.SealedAck) error {
	return e.r.SealedAck(e.conn, ack)
}

// trusted is a test-only trusted device: it serves sealed chunks from a
// map and records what the receiver sends it.
type trusted struct {
	id      crypt.DeviceID
	conn    *protocol.Conn
	ctx     context.Context
	autoAck bool
	gate    chan struct{} // when set, chunk requests wait for it
	failure error         // when set, chunk requests fail with it

	mu       sync.Mutex
	chunks   map[string][]byte
	requests map[string]int
	acks     []int64
	ackErrs  []string
	msgs     []*protocol.SealedIndex
}

func newTrusted() *trusted {
	return &trusted{id: randomID(), autoAck: true, chunks: make(map[string][]byte), requests: make(map[string]int)}
}

func (p *trusted) ClusterConfig(protocol.DeviceID, *protocol.ClusterConfig) error { return nil }
func (p *trusted) Index(protocol.DeviceID, *protocol.Index) error                 { return nil }
func (p *trusted) IndexUpdate(protocol.DeviceID, *protocol.IndexUpdate) error     { return nil }
func (p *trusted) Closed(protocol.DeviceID, error)                                {}

func (p *trusted) Request(ctx context.Context, _ protocol.DeviceID, req *protocol.Request) ([]byte, error) {
	p.mu.Lock()
	p.requests[string(req.GetChunkId())]++
	data, ok := p.chunks[string(req.GetChunkId())]
	gate, failure := p.gate, p.failure
	p.mu.Unlock()
	if failure != nil {
		return nil, failure
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !ok {
		return nil, protocol.ErrNoSuchFile
	}
	return data, nil
}

func (p *trusted) SealedIndex(_ protocol.DeviceID, idx *protocol.SealedIndex) error {
	p.mu.Lock()
	p.msgs = append(p.msgs, idx)
	p.mu.Unlock()
	if p.autoAck {
		recs := idx.GetRecords()
		return p.conn.SealedAck(p.ctx, &protocol.SealedAck{Folder: idx.GetFolder(), Sequence: recs[len(recs)-1].GetSequence()})
	}
	return nil
}

func (p *trusted) SealedAck(_ protocol.DeviceID, ack *protocol.SealedAck) error {
	p.mu.Lock()
	p.acks = append(p.acks, ack.GetSequence())
	if ack.GetError() != "" {
		p.ackErrs = append(p.ackErrs, ack.GetError())
	}
	p.mu.Unlock()
	return nil
}

// ackErrors returns the reasons acks gave for not storing.
func (p *trusted) ackErrors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.ackErrs)
}

// lastAck returns the highest ack received, -1 for none.
func (p *trusted) lastAck() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.acks) == 0 {
		return -1
	}
	return p.acks[len(p.acks)-1]
}

// received returns the records of the log the receiver sent, in order.
func (p *trusted) received() []*protocol.SealedRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*protocol.SealedRecord
	for _, m := range p.msgs {
		out = append(out, m.GetRecords()...)
	}
	return out
}

func (p *trusted) requested(id []byte) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[string(id)]
}

func (p *trusted) ackCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acks)
}

func (p *trusted) messages() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs)
}

// addChunk makes a chunk of size random bytes that p serves, returning its ID.
func (p *trusted) addChunk(size int) []byte {
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	data := make([]byte, size)
	_, _ = rand.Read(data)
	p.mu.Lock()
	p.chunks[string(id)] = data
	p.mu.Unlock()
	return id
}

// served is one side of a connection.
type served struct {
	conn *protocol.Conn
	errc chan error
	err  error
	once sync.Once
}

// wait returns Serve's result.
func (s *served) wait() error {
	s.once.Do(func() { s.err = <-s.errc })
	return s.err
}

// sharing connects p to n and sends the cluster config of a trusted
// device that shares the folder with n and has sent it nothing yet.
func sharing(t *testing.T, n *node, p *trusted) (recv *served) {
	t.Helper()
	recv, _ = connectTrusted(t, n, p)
	if err := p.conn.ClusterConfig(context.Background(), clusterConfig(n, p, 0, 0)); err != nil {
		t.Fatal(err)
	}
	return recv
}

// connectTrusted connects the receiver n with the trusted device p over net.Pipe.
func connectTrusted(t *testing.T, n *node, p *trusted) (recv, dev *served) {
	t.Helper()
	e := &engine{r: n.r}
	return connect(t, n.id, e, &e.ctx, &e.conn, p.id, p, &p.ctx, &p.conn, func() {})
}

// linkNodes connects two receivers, each sending its ClusterConfig first,
// as the engine does.
func linkNodes(t *testing.T, a, b *node) (sa, sb *served) {
	t.Helper()
	ea, eb := &engine{r: a.r}, &engine{r: b.r}
	before := func() {
		ctx := context.Background()
		if err := ea.conn.ClusterConfig(ctx, &protocol.ClusterConfig{Folders: a.r.ClusterFolders(ctx, b.id)}); err != nil {
			t.Fatal(err)
		}
		if err := eb.conn.ClusterConfig(ctx, &protocol.ClusterConfig{Folders: b.r.ClusterFolders(ctx, a.id)}); err != nil {
			t.Fatal(err)
		}
	}
	return connect(t, a.id, ea, &ea.ctx, &ea.conn, b.id, eb, &eb.ctx, &eb.conn, before)
}

// connect serves two Conns over net.Pipe, filling in each model's context
// and connection and calling before ahead of serving, and stops them at the
// end of the test.
func connect(t *testing.T, aID crypt.DeviceID, am protocol.Model, actx *context.Context, aconn **protocol.Conn,
	bID crypt.DeviceID, bm protocol.Model, bctx *context.Context, bconn **protocol.Conn, before func()) (sa, sb *served) {
	t.Helper()
	pa, pb := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	opts := protocol.Options{Timeout: time.Minute}
	*actx, *bctx = ctx, ctx
	*aconn = protocol.NewConn(protocol.DeviceID(bID), pa, am, opts)
	*bconn = protocol.NewConn(protocol.DeviceID(aID), pb, bm, opts)
	sa = &served{conn: *aconn, errc: make(chan error, 1)}
	sb = &served{conn: *bconn, errc: make(chan error, 1)}
	before()
	go func() { sa.errc <- sa.conn.Serve(ctx) }()
	go func() { sb.errc <- sb.conn.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		sa.wait()
		sb.wait()
	})
	return sa, sb
}

// clusterConfig is p's ClusterConfig for folderID naming the receiver n
// with log ID logID and sequence seq.
func clusterConfig(n *node, p *trusted, logID uint64, seq int64) *protocol.ClusterConfig {
	return &protocol.ClusterConfig{Folders: []*protocol.Folder{{
		Id: folderID, Type: protocol.FolderType_FOLDER_TYPE_ENCRYPTED,
		Devices: []*protocol.FolderDevice{
			{DeviceId: n.id[:], IndexId: logID, MaxSequence: seq, Encrypted: true},
			{DeviceId: p.id[:]},
		},
	}}}
}

// record is a sealed record of p's with counter and the given chunks; all
// records of one file index share a file key.
func record(p *trusted, counter uint64, file byte, chunks ...[]byte) *protocol.SealedRecord {
	fk := make([]byte, 32)
	fk[0], fk[1] = file, p.id[0]
	sealed := make([]byte, 40)
	_, _ = rand.Read(sealed)
	return &protocol.SealedRecord{Sequence: int64(counter), Origin: p.id[:], Counter: counter,
		FileKey: fk, Sealed: sealed, Chunks: chunks}
}

// send sends recs from p to the receiver as one SealedIndex.
func (p *trusted) send(t *testing.T, recs ...*protocol.SealedRecord) {
	t.Helper()
	if err := p.conn.SealedIndex(p.ctx, &protocol.SealedIndex{Folder: folderID, Records: recs}); err != nil {
		t.Fatal(err)
	}
}

// logID returns the receiver's log ID of folderID.
func (n *node) logID(t *testing.T) uint64 {
	t.Helper()
	id, err := n.db.ReceiverLogID(context.Background(), folderID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// records returns every record n holds, in log order.
func (n *node) records(t *testing.T) []db.SealedRecord {
	t.Helper()
	recs, err := n.db.SealedRecordsAfter(context.Background(), folderID, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// chunkSizes returns n's chunk list, ID to size.
func (n *node) chunkSizes(t *testing.T) map[string]int64 {
	t.Helper()
	out := make(map[string]int64)
	err := n.db.SealedChunks(context.Background(), folderID, func(c db.SealedChunk) error {
		out[string(c.ID)] = c.Size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
