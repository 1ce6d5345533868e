package backup

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

func TestUploadAckReleasesChunks(t *testing.T) {
	keys := testKeys(t, 1)
	n := startForkNode(t)
	u := n.b.newUpload(n.f, keys, crypt.DeviceID{4})
	a, b := sampleRecord(), sampleRecord()
	b.Name, b.Sequence = "b", 50
	if _, err := u.seal([]index.Record{a}, 1, nil); err != nil {
		t.Fatal(err)
	}
	id := keys.ChunkID(a.Blocks[0].Hash)
	if _, ok := u.lookup(id); !ok {
		t.Fatal("a sealed record's chunk is not served")
	}
	// The same chunk in a later record keeps it past the first ack.
	if _, err := u.seal([]index.Record{b}, 1, nil); err != nil {
		t.Fatal(err)
	}
	u.ack(a.Sequence)
	if _, ok := u.lookup(id); !ok {
		t.Fatal("chunk dropped while a later record still needs it")
	}
	u.ack(b.Sequence)
	if _, ok := u.lookup(id); ok {
		t.Fatal("chunk kept after every record needing it was acknowledged")
	}
}

// TestUploadInline: a receiver's message carries the small chunks of its
// records, sealed, each once (from a copy that is readable as scanned);
// not a large one, nor one whose file changed since it was scanned, nor
// any of a deletion.
func TestUploadInline(t *testing.T) {
	n := startForkNode(t)
	keys := testKeys(t, 1)
	u := n.b.newUpload(n.f, keys, crypt.DeviceID{4})
	dir := n.dir
	fileRec := func(name string, data []byte, seq int64) index.Record {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return index.Record{Name: name, Type: index.File, Size: int64(len(data)), Sequence: seq,
			Blocks: []index.Block{{Size: uint32(len(data)), Hash: chunk.HashOf(data)}}}
	}
	small := bytes.Repeat([]byte("small file "), 200)
	big := make([]byte, inlineChunk+1)
	recs := []index.Record{
		fileRec("first.txt", small, 0), // changed below: its copy in small.txt is sent
		fileRec("small.txt", small, 1),
		fileRec("copy.txt", small, 2),
		fileRec("big.bin", big, 3),
		fileRec("changed.txt", []byte("as scanned"), 4),
		{Name: "gone.txt", Type: index.File, Deleted: true, Sequence: 5, Blocks: []index.Block{{Size: 3, Hash: chunk.HashOf([]byte("old"))}}},
	}
	for _, name := range []string{"changed.txt", "first.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("as changed"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := u.inline(t.Context(), recs)
	if len(got) != 1 {
		t.Fatalf("%d inline chunks, want 1 (the small file's)", len(got))
	}
	if want := keys.ChunkID(chunk.HashOf(small)); !bytes.Equal(got[0].GetId(), want[:]) {
		t.Fatal("the inline chunk is not the small file's")
	}
	plain, err := keys.OpenBlockTo(nil, chunk.HashOf(small), got[0].GetBody())
	if err != nil || !bytes.Equal(plain, small) {
		t.Fatalf("the inline chunk does not open to the file: %v", err)
	}
}

// TestPreseal: presealing seals the small chunks of the folder's files
// (not large ones, nor files changed since their scan), and the upload
// sends those bodies inline instead of reading the files again: here a
// file changed after presealing, which read then would leave out, still
// goes with the body made while it matched its record.
func TestPreseal(t *testing.T) {
	n := startForkNode(t)
	keys := testKeys(t, 1)
	dir := n.dir
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := func(name string, data []byte) index.Record {
		write(name, data)
		return index.Record{Name: name, Type: index.File, Size: int64(len(data)), Version: index.Vector{{ID: 1, Value: 1}},
			Blocks: []index.Block{{Size: uint32(len(data)), Hash: chunk.HashOf(data)}}}
	}
	a, b := []byte("first small file"), []byte("second small file")
	recs := []index.Record{rec("a.txt", a), rec("b.txt", b), rec("big.bin", make([]byte, inlineChunk+1)), rec("changed.txt", []byte("as scanned"))}
	if _, err := n.f.Index().UpdateLocal(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	write("changed.txt", []byte("as changed"))

	if n := n.b.preseal(t.Context(), n.f, keys); n == 0 {
		t.Fatal("nothing presealed")
	}
	n.b.share("f").presealed.mu.Lock()
	held := len(n.b.share("f").presealed.bodies)
	n.b.share("f").presealed.mu.Unlock()
	if held != 2 {
		t.Fatalf("%d bodies presealed, want the two small files'", held)
	}
	write("b.txt", []byte("changed after presealing"))
	got := n.b.newUpload(n.f, keys, crypt.DeviceID{4}).inline(t.Context(), n.f.Index().LocalSince(0))
	if len(got) != 2 {
		t.Fatalf("%d inline chunks, want 2", len(got))
	}
	byID := map[crypt.ChunkID][]byte{}
	for _, c := range got {
		byID[crypt.ChunkID(c.GetId())] = c.GetBody()
	}
	for _, data := range [][]byte{a, b} {
		if plain, err := keys.OpenBlockTo(nil, chunk.HashOf(data), byID[keys.ChunkID(chunk.HashOf(data))]); err != nil || !bytes.Equal(plain, data) {
			t.Fatalf("the inline chunk of %q does not open to it: %v", data, err)
		}
	}
	if n.b.share("f").presealed.take(keys.ChunkID(chunk.HashOf(a))) != nil {
		t.Fatal("a presealed body was left after the upload took it")
	}
}

// TestServeChunk: a receiver asking for a chunk of a record it was sent
// gets it sealed, into a pooled buffer; one never sent, or asked for by
// another connection, is not served.
func TestServeChunk(t *testing.T) {
	n := startForkNode(t)
	keys := testKeys(t, 1)
	data := bytes.Repeat([]byte("a large chunk "), (inlineChunk+100)/14)
	if err := os.WriteFile(filepath.Join(n.dir, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := index.Record{Name: "big.bin", Type: index.File, Size: int64(len(data)), Sequence: 1, Version: index.Vector{{ID: 1, Value: 1}},
		Blocks: []index.Block{{Size: uint32(len(data)), Hash: chunk.HashOf(data)}}}
	p := n.peer(t, n.receiver)
	u := n.b.newUpload(n.f, keys, n.receiver)
	l := n.b.link(p)
	l.mu.Lock()
	l.uploads["f"] = u
	l.mu.Unlock()
	if _, err := u.seal([]index.Record{r}, 1, nil); err != nil {
		t.Fatal(err)
	}
	id := keys.ChunkID(r.Blocks[0].Hash)
	req := &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: "f", ChunkId: id[:], Size: uint32(crypt.MaxSealedChunkSize)}
	body, err := n.b.ServeChunk(p, req)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := keys.OpenBlockTo(nil, r.Blocks[0].Hash, body)
	if err != nil || !bytes.Equal(plain, data) {
		t.Fatalf("served chunk does not open to the file: %v", err)
	}
	protocol.Recycle(body)
	other := crypt.ChunkID{7}
	if _, err := n.b.ServeChunk(p, &protocol.Request{Kind: req.Kind, Folder: "f", ChunkId: other[:], Size: req.Size}); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("unsent chunk: %v", err)
	}
	if _, err := n.b.ServeChunk(n.peer(t, n.receiver), req); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("chunk served to another connection: %v", err)
	}
}

// TestStalledReceiverReported: a receiver that takes no step with this
// device's waiting messages (its store fails and it retries) shows on its
// peer entry until it acknowledges again; before, both sides said idle.
func TestStalledReceiverReported(t *testing.T) {
	defer func(d time.Duration) { ackStall = d }(ackStall)
	ackStall = 40 * time.Millisecond
	n := startForkNode(t)
	u := n.b.newUpload(n.f, testKeys(t, 1), n.receiver)
	for i := range sealedWindow {
		u.inflight = append(u.inflight, int64(i+1))
	}
	done := make(chan error, 1)
	go func() { done <- u.waitRoom(t.Context()) }()
	testutil.Eventually(t, 10*time.Second, "the stalled receiver reported", func() bool {
		return strings.Contains(n.receiverErr(t), "stored nothing of this device")
	})
	u.ack(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("still reported after an ack: %q", e)
	}
}

// TestReceiverReasonShown: a receiver's word that it cannot store shows on
// its peer entry, cut to a bounded length, until it acknowledges again.
func TestReceiverReasonShown(t *testing.T) {
	n := startForkNode(t)
	p := n.peer(t, n.receiver)
	u := n.b.newUpload(n.f, testKeys(t, 1), n.receiver)
	l := n.b.link(p)
	l.mu.Lock()
	l.uploads["f"] = u
	l.mu.Unlock()
	n.b.SealedAck(p, &protocol.SealedAck{Folder: "f", Error: "writing pack: no space left on device" + strings.Repeat("!", 1000)})
	e := n.receiverErr(t)
	if !strings.Contains(e, "cannot store this device's records: writing pack: no space left on device") || len(e) > 400 {
		t.Fatalf("peer entry = %q", e)
	}
	n.b.SealedAck(p, &protocol.SealedAck{Folder: "f", Sequence: 1})
	if e := n.receiverErr(t); e != "" {
		t.Fatalf("still reported after an ack: %q", e)
	}
}

// TestNoCompression: by default a compressible chunk goes to receivers
// compressed; with Options.NoCompression its sealed size is that of its
// plaintext's size class, whatever its content.
func TestNoCompression(t *testing.T) {
	n := startForkNode(t)
	keys := testKeys(t, 1)
	text := bytes.Repeat([]byte("very compressible text "), 2000)
	if err := os.WriteFile(filepath.Join(n.dir, "t.txt"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := blockRef{name: "t.txt", size: uint32(len(text)), hash: chunk.HashOf(text)}
	u := n.b.newUpload(n.f, keys, crypt.DeviceID{4})
	small, err := u.sealedBody(ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.b.opts.NoCompression = true
	plain, err := u.sealedBody(ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(small) >= len(text)/4 || len(plain) != crypt.SealedChunkLen(len(text)) {
		t.Fatalf("sealed %d bytes compressed, %d not (want %d); plaintext %d", len(small), len(plain), crypt.SealedChunkLen(len(text)), len(text))
	}
	if got, err := keys.OpenBlockTo(nil, ref.hash, plain); err != nil || !bytes.Equal(got, text) {
		t.Fatalf("the uncompressed body does not open: %v", err)
	}
}
