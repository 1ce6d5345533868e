package receiver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/blob/mem"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

func TestIngest(t *testing.T) {
	ctx := context.Background()
	p := newTrusted()
	n := newNode(t, localStore(t), p.id)
	recv := sharing(t, n, p)
	a, b, c := p.addChunk(100), p.addChunk(200), p.addChunk(300)
	// a and b are referenced twice: fetched once each.
	r1, r2, r3 := record(p, 1, 1, a, b), record(p, 2, 2, b, c), record(p, 3, 1, a)
	p.send(t, r1, r2, r3)
	testutil.Eventually(t, waitTimeout, "ack of 3", func() bool { return p.lastAck() == 3 })
	for _, id := range [][]byte{a, b, c} {
		if got := p.requested(id); got != 1 {
			t.Fatalf("chunk %x requested %d times, want 1", id[:4], got)
		}
	}
	st, err := n.r.Status(ctx, folderID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 3 || st.Files != 2 || st.Chunks != 3 || st.StoredBytes != 600 ||
		st.ReferencedBytes != 900 || st.DedupRatio != 1.5 || st.LogSequence != 3 {
		t.Fatalf("status = %+v", st)
	}
	if len(st.Origins) != 1 || st.Origins[0].Device != p.id || st.Origins[0].MaxCounter != 3 ||
		time.Since(st.Origins[0].LastStored) > time.Minute {
		t.Fatalf("origins = %+v", st.Origins)
	}
	// The chunk bodies are stored as sent.
	for _, id := range [][]byte{a, b, c} {
		got, err := n.storedChunk(ctx, id)
		if err != nil || !bytes.Equal(got, p.chunks[string(id)]) {
			t.Fatalf("stored chunk %x: %v", id[:4], err)
		}
	}

	// Duplicates are dropped, the new record stored, nothing fetched again.
	r4 := record(p, 4, 3, a, c)
	p.send(t, r1, r2, r4)
	testutil.Eventually(t, waitTimeout, "ack of 4", func() bool { return p.lastAck() == 4 })
	// All duplicates: acknowledged, nothing stored.
	p.send(t, r3, r4)
	testutil.Eventually(t, waitTimeout, "ack of duplicates", func() bool { return p.ackCount() == 3 })
	if got := n.records(t); len(got) != 4 || got[3].Counter != 4 || got[3].Seq != 4 {
		t.Fatalf("records after duplicates: %+v", got)
	}
	for _, id := range [][]byte{a, b, c} {
		if got := p.requested(id); got != 1 {
			t.Fatalf("chunk %x requested %d times after duplicates, want 1", id[:4], got)
		}
	}

	// A chunk the peer does not have, or sends empty, makes its records
	// skipped; the others in the message are stored and the message acked.
	gone := bytes.Repeat([]byte{0xee}, 32)
	empty := p.addChunk(0)
	e := p.addChunk(50)
	r5, r6, r7 := record(p, 5, 4, gone, a), record(p, 6, 5, e), record(p, 7, 6, empty)
	p.send(t, r5, r6, r7)
	testutil.Eventually(t, waitTimeout, "ack of 7", func() bool { return p.lastAck() == 7 })
	got := n.records(t)
	if len(got) != 5 || got[4].Counter != 6 || got[4].Seq != 5 {
		t.Fatalf("records after skips: %+v", got)
	}
	// The log in the store: one object per append, keyed by first sequence.
	var keys []string
	err = n.store.List(ctx, "r/"+folderKey(folderID)+"/log/", func(i blob.Info) error {
		keys = append(keys, i.Key[len(i.Key)-16:])
		return nil
	})
	if err != nil || fmt.Sprint(keys) != "[0000000000000001 0000000000000004 0000000000000005]" {
		t.Fatalf("log objects %v, %v", keys, err)
	}
	// An empty message is not acknowledged.
	p.send(t)
	p.send(t, record(p, 8, 7))
	testutil.Eventually(t, waitTimeout, "ack of 8", func() bool { return p.lastAck() == 8 })
	if p.ackCount() != 5 {
		t.Fatalf("acks %v: the empty message was acknowledged", p.acks)
	}
	if err := n.r.ClusterFolders(ctx, p.id)[0].GetDevices()[1].GetMaxSequence(); err != 8 {
		t.Fatalf("cluster config max counter of the peer = %d, want 8", err)
	}
	select {
	case err := <-recv.errc:
		t.Fatalf("connection ended: %v", err)
	default:
	}
}

func TestClusterFolders(t *testing.T) {
	ctx := context.Background()
	p, other := newTrusted(), newTrusted()
	n := newNode(t, mem.New(), p.id)
	if got := n.r.ClusterFolders(ctx, other.id); len(got) != 0 {
		t.Fatalf("folders for an unshared device: %v", got)
	}
	got := n.r.ClusterFolders(ctx, p.id)
	if len(got) != 1 {
		t.Fatalf("folders = %v", got)
	}
	wf := got[0]
	if wf.GetId() != folderID || wf.GetLabel() != "Docs" || wf.GetType() != protocol.FolderType_FOLDER_TYPE_ENCRYPTED ||
		wf.GetPolynomial() != 0 || len(wf.GetDevices()) != 2 {
		t.Fatalf("folder = %v", wf)
	}
	self, dev := wf.GetDevices()[0], wf.GetDevices()[1]
	if !bytes.Equal(self.GetDeviceId(), n.id[:]) || self.GetIndexId() != n.logID(t) || self.GetMaxSequence() != 0 || !self.GetEncrypted() {
		t.Fatalf("own entry = %v", self)
	}
	if !bytes.Equal(dev.GetDeviceId(), p.id[:]) || dev.GetMaxSequence() != 0 || dev.GetEncrypted() || dev.GetName() == "" {
		t.Fatalf("peer entry = %v", dev)
	}
	if !n.r.Holds(folderID) || n.r.Holds("other") {
		t.Fatal("Holds is wrong")
	}
	// Unsharing and reloading: the peer gets nothing more.
	if err := n.db.UnshareFolder(ctx, folderID, p.id.String()); err != nil {
		t.Fatal(err)
	}
	if err := n.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := n.r.ClusterFolders(ctx, p.id); len(got) != 0 {
		t.Fatalf("folders after unsharing: %v", got)
	}
	// The meta object follows the configuration.
	data, err := getLimited(ctx, n.store, metaKey(folderKey(folderID)), maxMetaSize)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseMeta(folderKey(folderID), data, nil)
	if err != nil || len(m.Devices) != 0 || m.LogID != n.logID(t) || m.Label != "Docs" || m.Path != "/srv/f" {
		t.Fatalf("meta = %+v, %v", m, err)
	}
}

func TestEnvelope(t *testing.T) {
	ctx := context.Background()
	p := newTrusted()
	n := newNode(t, localStore(t), p.id)
	connectTrusted(t, n, p)
	req := func(kind protocol.RequestKind, env, prev []byte) ([]byte, error) {
		return p.conn.Request(ctx, &protocol.Request{Folder: folderID, Kind: kind, Envelope: env, Previous: prev,
			Size: protocol.MaxEnvelopeSize})
	}
	get := protocol.RequestKind_REQUEST_KIND_ENVELOPE_GET
	put := protocol.RequestKind_REQUEST_KIND_ENVELOPE_PUT
	if _, err := req(get, nil, nil); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("get without envelope: %v", err)
	}
	env1, env2 := []byte("envelope one"), []byte("envelope two")
	sum := func(b []byte) []byte { s := sha256Sum(b); return s[:] }
	if _, err := req(put, env1, sum([]byte("x"))); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("put replacing a missing envelope: %v", err)
	}
	if got, err := req(put, env1, nil); err != nil || !bytes.Equal(got, env1) {
		t.Fatalf("first put = %q, %v", got, err)
	}
	// A second device making its own key loses: it is answered env1.
	if got, err := req(put, env2, nil); err != nil || !bytes.Equal(got, env1) {
		t.Fatalf("put expecting none = %q, %v; want the held envelope", got, err)
	}
	if got, err := req(put, env2, sum(env2)); err != nil || !bytes.Equal(got, env1) {
		t.Fatalf("put with a wrong previous = %q, %v", got, err)
	}
	if got, err := req(put, env2, sum(env1)); err != nil || !bytes.Equal(got, env2) {
		t.Fatalf("rewrap = %q, %v", got, err)
	}
	if got, err := req(get, nil, nil); err != nil || !bytes.Equal(got, env2) {
		t.Fatalf("get = %q, %v", got, err)
	}
	// Only the new generation is in the store: the superseded envelope
	// would open with the old password.
	if got, err := getLimited(ctx, n.store, envelopeKey(folderKey(folderID), 2), maxMetaSize); err != nil || !bytes.Equal(got, env2) {
		t.Fatalf("generation 2 in the store = %q, %v", got, err)
	}
	if _, err := getLimited(ctx, n.store, envelopeKey(folderKey(folderID), 1), maxMetaSize); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("the superseded generation 1 is still in the store: %v", err)
	}
	// Sizes: the envelope limit n and n+1, and an answer limit below it.
	direct := func(env []byte, size uint32) ([]byte, error) {
		s := sha256Sum(mustEnvelope(t, n))
		return n.r.Request(ctx, p.id, &protocol.Request{Folder: folderID, Kind: put, Envelope: env, Previous: s[:], Size: size})
	}
	big := bytes.Repeat([]byte{1}, protocol.MaxEnvelopeSize)
	if got, err := direct(big, protocol.MaxEnvelopeSize); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("envelope of the maximum size: %d bytes, %v", len(got), err)
	}
	if _, err := direct(append(big, 1), protocol.MaxEnvelopeSize+1); !errors.Is(err, protocol.ErrInvalidFile) {
		t.Fatalf("envelope one byte too large: %v", err)
	}
	if _, err := direct(env1, uint32(len(env1)-1)); !errors.Is(err, protocol.ErrInvalidFile) {
		t.Fatalf("envelope larger than the answer: %v", err)
	}
	if got := mustEnvelope(t, n); !bytes.Equal(got, big) {
		t.Fatalf("refused puts changed the envelope")
	}
	if _, err := n.r.Request(ctx, p.id, &protocol.Request{Folder: folderID, Kind: get, Size: protocol.MaxEnvelopeSize - 1}); !errors.Is(err, protocol.ErrInvalidFile) {
		t.Fatalf("get with a short answer limit: %v", err)
	}
}

func mustEnvelope(t *testing.T, n *node) []byte {
	t.Helper()
	env, _, err := n.db.ReceiverEnvelope(context.Background(), folderID)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestRequestsRefused(t *testing.T) {
	ctx := context.Background()
	p, stranger := newTrusted(), newTrusted()
	n := newNode(t, mem.New(), p.id)
	n.share(t, stranger.id)
	if err := n.db.UnshareFolder(ctx, folderID, stranger.id.String()); err != nil {
		t.Fatal(err)
	}
	if err := n.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	a := p.addChunk(10)
	sharing(t, n, p)
	p.send(t, record(p, 1, 1, a))
	testutil.Eventually(t, waitTimeout, "ack", func() bool { return p.lastAck() == 1 })

	chunkReq := &protocol.Request{Folder: folderID, Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, ChunkId: a, Size: 10}
	if got, err := p.conn.Request(ctx, chunkReq); err != nil || !bytes.Equal(got, p.chunks[string(a)]) {
		t.Fatalf("chunk for the sharing peer: %v", err)
	}
	// The same requests from a device the folder is not shared with.
	_, sdev := connectTrusted(t, n, stranger)
	if _, err := sdev.conn.Request(ctx, chunkReq); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("chunk for an unshared peer: %v", err)
	}
	getEnv := &protocol.Request{Folder: folderID, Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_GET, Size: 100}
	if _, err := sdev.conn.Request(ctx, getEnv); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("envelope for an unshared peer: %v", err)
	}
	if err := n.r.ClusterConfig(ctx, sdev.conn, clusterConfig(n, stranger, 0, 0).Folders[0]); !errors.Is(err, ErrNotShared) {
		t.Fatalf("cluster config from an unshared peer: %v", err)
	}
	if err := n.r.SealedIndex(sdev.conn, &protocol.SealedIndex{Folder: folderID}); !errors.Is(err, ErrNotShared) {
		t.Fatalf("sealed index from an unshared peer: %v", err)
	}
	// Wrong kinds, unknown folders, short answer limits.
	cases := []struct {
		name string
		req  *protocol.Request
		want error
	}{
		{"unknown folder", &protocol.Request{Folder: "nope", Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, ChunkId: a, Size: 10}, protocol.ErrNoSuchFile},
		{"file block", &protocol.Request{Folder: folderID, Name: "x", Size: 10}, protocol.ErrInvalidFile},
		{"chunk larger than size", &protocol.Request{Folder: folderID, Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, ChunkId: a, Size: 9}, protocol.ErrInvalidFile},
		{"unknown chunk", &protocol.Request{Folder: folderID, Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, ChunkId: make([]byte, 32), Size: 10}, protocol.ErrNoSuchFile},
	}
	for _, c := range cases {
		if _, err := p.conn.Request(ctx, c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := n.r.Status(ctx, "nope"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("status of an unknown folder: %v", err)
	}
}

func TestFlowControl(t *testing.T) {
	ctx := context.Background()
	p := newTrusted()
	p.gate = make(chan struct{})
	n := newNode(t, mem.New(), p.id)
	recv := sharing(t, n, p)
	// The first message's chunk request blocks the ingester.
	p.send(t, record(p, 1, 1, p.addChunk(10)))
	testutil.Eventually(t, waitTimeout, "the first chunk request", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.requests) == 1
	})
	for i := range maxQueued {
		p.send(t, record(p, uint64(i+2), 1))
	}
	// A request answered after them shows they were all taken.
	alive := &protocol.Request{Folder: folderID, Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_GET, Size: 100}
	if _, err := p.conn.Request(ctx, alive); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("connection after %d queued messages: %v", maxQueued, err)
	}
	p.send(t, record(p, 100, 1))
	if err := recv.wait(); !errors.Is(err, ErrFlowControl) {
		t.Fatalf("connection ended with %v, want ErrFlowControl", err)
	}
	close(p.gate)
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

// TestIngestInline: chunks sent along with their records are stored
// without a request; one missing from the message, or of an impossible
// size, is requested; one the receiver holds already is not stored again,
// and one no record references is dropped.
func TestIngestInline(t *testing.T) {
	ctx := context.Background()
	p := newTrusted()
	n := newNode(t, localStore(t), p.id)
	sharing(t, n, p)
	held := p.addChunk(100)
	p.send(t, record(p, 1, 1, held))
	testutil.Eventually(t, waitTimeout, "ack of 1", func() bool { return p.lastAck() == 1 })

	a, b, c, stray := p.addChunk(100), p.addChunk(200), p.addChunk(300), p.addChunk(400)
	body := func(id []byte) []byte {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.chunks[string(id)]
	}
	msg := &protocol.SealedIndex{Folder: folderID, Records: []*protocol.SealedRecord{record(p, 2, 2, a, b, held), record(p, 3, 3, c)},
		Inline: []*protocol.InlineChunk{
			{Id: a, Body: body(a)},
			{Id: held, Body: []byte("not what it holds")},
			{Id: c, Body: make([]byte, crypt.MaxSealedChunkSize+1)},
			{Id: stray, Body: body(stray)},
		}}
	if err := p.conn.SealedIndex(ctx, msg); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "ack of 3", func() bool { return p.lastAck() == 3 })
	for id, want := range map[string]int{string(a): 0, string(b): 1, string(c): 1, string(held): 1, string(stray): 0} {
		if got := p.requested([]byte(id)); got != want {
			t.Errorf("chunk %x requested %d times, want %d", id[:4], got, want)
		}
	}
	for _, id := range [][]byte{a, b, c, held} {
		got, err := n.storedChunk(ctx, id)
		if err != nil || !bytes.Equal(got, body(id)) {
			t.Errorf("stored chunk %x: %d bytes, %v", id[:4], len(got), err)
		}
	}
	if _, err := n.storedChunk(ctx, stray); err == nil {
		t.Error("a chunk no record references was stored")
	}
}
