package restore

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const (
	testFolder   = "docs"
	testPassword = "correct horse battery staple"
	// sendWindow is how many SealedIndex messages the test receiver keeps
	// unacknowledged, as the real one does.
	sendWindow = 4
)

// folderSecrets are one folder key, its keys and its envelope, made once:
// sealing an envelope costs a deliberately slow scrypt.
var folderSecrets = sync.OnceValues(func() (*crypt.Keys, []byte) {
	var k crypt.FolderKey
	for i := range k {
		k[i] = byte(i*7 + 1)
	}
	keys, err := crypt.DeriveKeys(k)
	if err != nil {
		panic(err)
	}
	env, err := crypt.SealEnvelope(k, []byte(testPassword))
	if err != nil {
		panic(err)
	}
	return keys, env
})

// newIdentity makes a device identity in a fresh directory.
func newIdentity(t testing.TB, name string) *crypt.Identity {
	t.Helper()
	id, _, err := crypt.LoadOrCreateIdentity(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// sealer seals records and chunks of the test folder as a trusted device
// would, and builds a receiver's log of them.
type sealer struct {
	t      testing.TB
	keys   *crypt.Keys
	chunks map[crypt.ChunkID][]byte
	log    []*protocol.SealedRecord
	ids    map[string][]crypt.ChunkID // chunk IDs of the latest record per name
}

func newSealer(t testing.TB) *sealer {
	keys, _ := folderSecrets()
	return &sealer{t: t, keys: keys, chunks: map[crypt.ChunkID][]byte{}, ids: map[string][]crypt.ChunkID{}}
}

// content chunks data with the folder's polynomial, seals its chunks and
// returns the blocks.
func (s *sealer) content(data []byte) []index.Block {
	s.t.Helper()
	sp, err := chunk.NewSplitter(s.keys.Polynomial())
	if err != nil {
		s.t.Fatal(err)
	}
	var blocks []index.Block
	err = sp.Split(bytes.NewReader(data), func(c chunk.Chunk, b []byte) error {
		id, body, err := s.keys.SealChunk(b, c.Hash, true)
		if err != nil {
			return err
		}
		s.chunks[id] = body
		blocks = append(blocks, index.Block{Offset: c.Offset, Size: c.Size, Hash: c.Hash})
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return blocks
}

// add seals r as made by origin with the given counter and appends it to
// the log. r.Sequence is set to counter.
func (s *sealer) add(r index.Record, origin crypt.DeviceID, counter uint64) *protocol.SealedRecord {
	s.t.Helper()
	r.Sequence = int64(counter)
	payload, err := proto.Marshal(&protocol.SealedPayload{File: toWire(&r), Polynomial: uint64(s.keys.Polynomial())})
	if err != nil {
		s.t.Fatal(err)
	}
	fk := s.keys.FileKey(r.Name)
	sealed, err := s.keys.SealRecord(crypt.RecordHeader{Folder: testFolder, File: fk, Origin: origin, Counter: counter}, payload)
	if err != nil {
		s.t.Fatal(err)
	}
	sr := &protocol.SealedRecord{Sequence: int64(len(s.log) + 1), Origin: origin[:], Counter: counter, FileKey: fk[:], Sealed: sealed, Deleted: r.Deleted}
	var ids []crypt.ChunkID
	for _, b := range r.Blocks {
		id := s.keys.ChunkID(b.Hash)
		ids = append(ids, id)
		sr.Chunks = append(sr.Chunks, id[:])
	}
	s.ids[r.Name] = ids
	s.log = append(s.log, sr)
	return sr
}

// addTreeVersion seals every entry under dir as origin's records with
// version v, counters from first on. It returns the next counter.
func (s *sealer) addTreeVersion(dir string, origin crypt.DeviceID, first uint64, v index.Vector) uint64 {
	s.t.Helper()
	counter := first
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		r := index.Record{
			Name: filepath.ToSlash(rel), Mode: uint32(fi.Mode().Perm()), ModTime: fi.ModTime().UnixNano(),
			Version: v, ModifiedBy: origin.Short(),
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			r.Type = index.Symlink
			if r.Target, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.IsDir():
			r.Type = index.Dir
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			r.Size = int64(len(data))
			r.Blocks = s.content(data)
		}
		s.add(r, origin, counter)
		counter++
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return counter
}

// toWire is the wire form of a record, as the engine sends it, without any
// checks (tests seal hostile records too).
func toWire(r *index.Record) *protocol.FileInfo {
	fi := &protocol.FileInfo{
		Name: r.Name, Size: r.Size, Permissions: r.Mode, ModifiedNs: r.ModTime, Deleted: r.Deleted,
		Sequence: r.Sequence, SymlinkTarget: r.Target, ModifiedBy: uint64(r.ModifiedBy), Version: &protocol.Vector{},
	}
	switch r.Type {
	case index.Dir:
		fi.Type = protocol.FileInfoType_FILE_INFO_TYPE_DIRECTORY
	case index.Symlink:
		fi.Type = protocol.FileInfoType_FILE_INFO_TYPE_SYMLINK
	}
	for _, c := range r.Version {
		fi.Version.Counters = append(fi.Version.Counters, &protocol.Counter{Id: uint64(c.ID), Value: c.Value})
	}
	for _, b := range r.Blocks {
		fi.Blocks = append(fi.Blocks, &protocol.BlockInfo{Offset: b.Offset, Size: b.Size, Hash: b.Hash[:]})
	}
	return fi
}

// testReceiver is a receiver over real TLS on 127.0.0.1 serving one
// encrypted folder from memory, speaking the protocol as sync/receiver
// does: its ClusterConfig first, then, once the peer announces the folder,
// its log in messages of batch records with at most sendWindow
// unacknowledged.
type testReceiver struct {
	t        testing.TB
	id       *crypt.Identity
	addr     string
	shared   bool // offers the folder in its ClusterConfig
	refuse   bool // refuses every device in the TLS handshake
	envelope []byte
	chunks   map[crypt.ChunkID][]byte
	log      []*protocol.SealedRecord
	batch    int           // records per SealedIndex
	announce int64         // log sequence announced; len(log) when 0
	delay    time.Duration // before answering a chunk request
	// envelopeAfter holds the envelope back until that many records are
	// acknowledged, and then a moment more; envelopeNever for good.
	envelopeAfter int64
	envelopeNever bool
	// sendOnly, if set, is how many records of the log are sent; the rest
	// never come.
	sendOnly int

	mu         sync.Mutex
	acked      int64
	ackChanged chan struct{}
	maxUnacked int
	requests   int // sealed chunk requests served
	active     int // chunk requests being answered
	maxActive  int
	peerCC     *protocol.ClusterConfig
	// ackedAtEnvelope is what was acknowledged when the envelope went,
	// requestsAtEnvelope how many chunk requests were served by then.
	ackedAtEnvelope    int64
	requestsAtEnvelope int
}

// newTestReceiver returns a receiver serving s's log and chunks with the
// shared envelope. Change its fields before start.
func newTestReceiver(t testing.TB, s *sealer) *testReceiver {
	_, env := folderSecrets()
	return &testReceiver{t: t, id: newIdentity(t, "receiver"), shared: true, envelope: env,
		chunks: s.chunks, log: s.log, batch: 3, ackChanged: make(chan struct{})}
}

// start listens and serves connections until the test ends.
func (tr *testReceiver) start() {
	t := tr.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		ln.Close()
		wg.Wait()
	})
	cfg := crypt.ServerTLSConfig(tr.id, func(crypt.DeviceID) bool { return !tr.refuse })
	wg.Go(func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { tr.serve(ctx, tls.Server(raw, cfg)) })
		}
	})
}

func (tr *testReceiver) serve(ctx context.Context, tc *tls.Conn) {
	defer tc.Close()
	if err := tc.HandshakeContext(ctx); err != nil {
		return
	}
	peer, err := crypt.PeerDeviceID(tc.ConnectionState())
	if err != nil {
		return
	}
	if _, err := protocol.ExchangeHello(ctx, tc, &protocol.Hello{DeviceName: "receiver", ClientName: "test"}); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &receiverModel{tr: tr, ctx: ctx}
	m.conn = protocol.NewConn(protocol.DeviceID(peer), tc, m, protocol.Options{})
	cc := &protocol.ClusterConfig{}
	if tr.shared {
		seq := tr.announce
		if seq == 0 {
			seq = int64(len(tr.log))
		}
		cc.Folders = append(cc.Folders, &protocol.Folder{Id: testFolder, Type: protocol.FolderType_FOLDER_TYPE_ENCRYPTED,
			Devices: []*protocol.FolderDevice{
				{DeviceId: tr.id.ID[:], IndexId: 77, MaxSequence: seq, Encrypted: true},
				{DeviceId: peer[:]},
			}})
	}
	if err := m.conn.ClusterConfig(ctx, cc); err != nil {
		return
	}
	_ = m.conn.Serve(ctx)
	cancel()
	m.wg.Wait()
}

// receiverModel is the test receiver's side of one connection.
type receiverModel struct {
	tr   *testReceiver
	ctx  context.Context
	conn *protocol.Conn
	once sync.Once
	wg   sync.WaitGroup
}

func (m *receiverModel) ClusterConfig(_ protocol.DeviceID, cc *protocol.ClusterConfig) error {
	m.tr.mu.Lock()
	m.tr.peerCC = cc
	m.tr.mu.Unlock()
	for _, f := range cc.GetFolders() {
		if f.GetId() == testFolder && m.tr.shared {
			m.once.Do(func() { m.wg.Go(m.sendLog) })
		}
	}
	return nil
}

// sendLog sends the whole log, keeping at most sendWindow messages
// unacknowledged.
func (m *receiverModel) sendLog() {
	tr := m.tr
	var unacked []int64
	log := tr.log
	if tr.sendOnly > 0 {
		log = log[:tr.sendOnly]
	}
	for i := 0; i < len(log); i += tr.batch {
		for {
			tr.mu.Lock()
			for len(unacked) > 0 && unacked[0] <= tr.acked {
				unacked = unacked[1:]
			}
			n, changed := len(unacked), tr.ackChanged
			tr.mu.Unlock()
			if n < sendWindow {
				break
			}
			select {
			case <-changed:
			case <-m.ctx.Done():
				return
			}
		}
		msg := &protocol.SealedIndex{Folder: testFolder, Records: log[i:min(i+tr.batch, len(log))]}
		if err := m.conn.SealedIndex(m.ctx, msg); err != nil {
			return
		}
		unacked = append(unacked, msg.Records[len(msg.Records)-1].GetSequence())
		tr.mu.Lock()
		tr.maxUnacked = max(tr.maxUnacked, len(unacked))
		tr.mu.Unlock()
	}
}

func (m *receiverModel) Index(protocol.DeviceID, *protocol.Index) error { return nil }
func (m *receiverModel) IndexUpdate(protocol.DeviceID, *protocol.IndexUpdate) error {
	return nil
}

func (m *receiverModel) Request(_ context.Context, _ protocol.DeviceID, req *protocol.Request) ([]byte, error) {
	tr := m.tr
	if req.GetFolder() != testFolder || !tr.shared {
		return nil, protocol.ErrNoSuchFile
	}
	switch req.GetKind() {
	case protocol.RequestKind_REQUEST_KIND_ENVELOPE_GET:
		if tr.envelope == nil {
			return nil, protocol.ErrNoSuchFile
		}
		if tr.envelopeNever {
			<-m.ctx.Done()
			return nil, m.ctx.Err()
		}
		for tr.envelopeAfter > 0 {
			tr.mu.Lock()
			done, changed := tr.acked >= tr.envelopeAfter, tr.ackChanged
			tr.mu.Unlock()
			if done {
				// A moment for whatever more the device would take in.
				time.Sleep(200 * time.Millisecond)
				break
			}
			select {
			case <-changed:
			case <-m.ctx.Done():
				return nil, m.ctx.Err()
			}
		}
		tr.mu.Lock()
		tr.ackedAtEnvelope = tr.acked
		tr.requestsAtEnvelope = tr.requests
		tr.mu.Unlock()
		return tr.envelope, nil
	case protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK:
		tr.mu.Lock()
		tr.requests++
		tr.active++
		tr.maxActive = max(tr.maxActive, tr.active)
		tr.mu.Unlock()
		time.Sleep(tr.delay)
		tr.mu.Lock()
		tr.active--
		tr.mu.Unlock()
		body, ok := tr.chunks[crypt.ChunkID(req.GetChunkId())]
		if !ok {
			return nil, protocol.ErrNoSuchFile
		}
		return body, nil
	}
	return nil, protocol.ErrInvalidFile
}

func (m *receiverModel) Closed(protocol.DeviceID, error) {}

func (m *receiverModel) SealedIndex(protocol.DeviceID, *protocol.SealedIndex) error {
	return errors.New("a recovering device sent records")
}

func (m *receiverModel) SealedAck(_ protocol.DeviceID, ack *protocol.SealedAck) error {
	tr := m.tr
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.acked = max(tr.acked, ack.GetSequence())
	close(tr.ackChanged)
	tr.ackChanged = make(chan struct{})
	return nil
}

// options are Recover options for a fresh device recovering from tr into
// a target that does not exist yet.
func (tr *testReceiver) options(t testing.TB) Options {
	return Options{
		Identity: newIdentity(t, "new-laptop"),
		Address:  tr.addr,
		Receiver: tr.id.ID,
		Folder:   testFolder,
		Password: []byte(testPassword),
		To:       filepath.Join(t.TempDir(), "restored"),
	}
}

// recoverCtx bounds one Recover call in a test.
func recoverCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
