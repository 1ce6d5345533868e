package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/blob/mem"
	"lockstep/sync/protocol"
	"lockstep/sync/receiver/pack"
	"lockstep/test/testutil"
)

// remoteNode is newNode tuned for a remote store.
func remoteNode(t *testing.T, store blob.Store, peers ...crypt.DeviceID) *node {
	t.Helper()
	n := newNode(t, store, peers...)
	n.r.SetRemoteStore()
	return n
}

// TestRemoteStorePacks: on a remote store every chunk shorter than
// remotePackBelow goes into packs of about remotePackTarget, none bigger
// than a pack buffer, and longer ones (remotePackBelow-1, remotePackBelow,
// remotePackBelow+1) are blobs of their own; each is served byte-exact, by
// range and from packs read whole; no upload slot is left held.
func TestRemoteStorePacks(t *testing.T) {
	for name, open := range map[string]func(*testing.T) blob.Store{"local": localStore, "s3": s3Store} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := newTrusted()
			n := remoteNode(t, open(t), p.id)
			sharing(t, n, p)
			var ids [][]byte
			var want int64
			var recs []*protocol.SealedRecord
			sizes := []int{1, 100, defaultPackBelow - 1, defaultPackBelow, defaultPackBelow + 1, remotePackBelow - 1, remotePackBelow, remotePackBelow + 1}
			for i := range 40 {
				size := sizes[i%len(sizes)]
				if i >= len(sizes) {
					size = 1 + i*52361%(remotePackBelow-1)
				}
				ids = append(ids, p.addChunk(size))
				want += int64(size)
				recs = append(recs, record(p, uint64(i+1), byte(i), ids[i]))
			}
			p.send(t, recs...)
			testutil.Eventually(t, waitTimeout, "all stored", func() bool { return p.lastAck() == int64(len(recs)) })

			chunks, packs := n.objects(t)
			if chunks != 2 || len(packs) < 2 {
				t.Fatalf("%d chunk blobs and %d packs, want 2 and at least 2 (%d bytes in packs of about %d)", chunks, len(packs), want, remotePackTarget)
			}
			for _, info := range packs {
				if info.Size > packBufSize {
					t.Fatalf("pack %s of %d bytes, more than a pack buffer (%d)", info.Key, info.Size, packBufSize)
				}
			}
			for i, id := range ids {
				loc, err := n.db.SealedChunk(ctx, folderID, id)
				if err != nil || (loc.Pack == nil) != (loc.Size >= remotePackBelow) {
					t.Fatalf("chunk %d of %d bytes: %+v, %v; want it in a pack if shorter than %d", i, loc.Size, loc.Pack, err, remotePackBelow)
				}
			}
			n.checkServed(t, p, ids) // the first of each pack by range, the others from the pack read whole
			n.checkServed(t, p, ids)
			if st, err := n.r.Status(ctx, folderID); err != nil || st.Chunks != int64(len(ids)) || st.StoredBytes != want {
				t.Fatalf("status %+v, %v; want %d chunks of %d bytes", st, err, len(ids), want)
			}
			if held := len(n.r.packUploads); held != 0 {
				t.Fatalf("%d pack slots held after the ingest", held)
			}
		})
	}
}

// failingPacks is a store whose puts of packs fail, once armed, after the
// first ok of them.
type failingPacks struct {
	blob.Store
	armed atomic.Bool
	ok    atomic.Int64 // pack puts still to let through while armed
}

func (s *failingPacks) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.Contains(key, "/p/") && s.armed.Load() && s.ok.Add(-1) < 0 {
		return fmt.Errorf("put %s: %w", key, syscall.EIO)
	}
	return s.Store.Put(ctx, key, r, size)
}

// TestRemoteStoreFailureMidBatch: when a pack's upload fails while others
// of the same fetch went through, nothing of the message is recorded (no
// record, no chunk row, no acknowledgement) and no upload slot is left
// held; once the store works, the retry stores and serves everything.
func TestRemoteStoreFailureMidBatch(t *testing.T) {
	ctx := context.Background()
	store := &failingPacks{Store: mem.New()}
	p := newTrusted()
	n := remoteNode(t, store, p.id)
	sharing(t, n, p)

	store.ok.Store(2)
	store.armed.Store(true)
	var ids [][]byte
	var recs []*protocol.SealedRecord
	for i := range 30 { // several packs
		ids = append(ids, p.addChunk(remotePackBelow-1-i))
		recs = append(recs, record(p, uint64(i+1), byte(i), ids[i]))
	}
	p.send(t, recs...)
	testutil.Eventually(t, waitTimeout, "the store's failure in the status", func() bool {
		_, err := n.r.Status(ctx, folderID)
		return errors.Is(err, syscall.EIO)
	})
	if st, _ := n.r.Status(ctx, folderID); st.Records != 0 || st.Chunks != 0 {
		t.Fatalf("while a pack upload fails: %d records, %d chunks recorded; want none", st.Records, st.Chunks)
	}
	held, err := n.db.SealedChunksHeld(ctx, folderID, ids)
	if err != nil || len(held) != 0 {
		t.Fatalf("chunks recorded while a pack upload fails: %d (%v)", len(held), err)
	}
	if got := p.lastAck(); got != 0 {
		t.Fatalf("acknowledged %d while a pack upload fails", got)
	}
	testutil.Eventually(t, waitTimeout, "pack slots given back", func() bool { return len(n.r.packUploads) == 0 })

	store.armed.Store(false)
	testutil.Eventually(t, waitTimeout, "all stored", func() bool { return p.lastAck() == int64(len(recs)) })
	n.checkServed(t, p, ids)
	if held := len(n.r.packUploads); held != 0 {
		t.Fatalf("%d pack slots held after the ingest", held)
	}
}

// countingStore counts the whole and ranged reads of a store, and fails
// every read while err is set.
type countingStore struct {
	blob.Store
	gets, ranges atomic.Int64
	mu           sync.Mutex
	err          error
}

func (s *countingStore) failing() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *countingStore) Get(ctx context.Context, key string, fn func(io.Reader) error) error {
	s.gets.Add(1)
	if err := s.failing(); err != nil {
		return err
	}
	return s.Store.Get(ctx, key, fn)
}

func (s *countingStore) GetRange(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	s.ranges.Add(1)
	if err := s.failing(); err != nil {
		return err
	}
	return blob.GetRange(ctx, s.Store, key, off, n, fn)
}

// readVia reads [off, off+n) of key through c.
func readVia(c *packCache, s blob.Store, key string, off, n int64) ([]byte, error) {
	var got []byte
	err := c.getRange(context.Background(), s, key, off, n, func(r io.Reader) error {
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	return got, err
}

// TestPackCache: the first read of a pack is a ranged read, the second
// reads it whole, later ones of other chunks read nothing, and one of a
// chunk served already reads the store again; a missing pack is ErrNotExist
// and a failed read is not kept; reads past the end are short, as a
// store's.
func TestPackCache(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: mem.New()}
	data := bytes.Repeat([]byte("0123456789"), 1000)
	if err := store.Put(ctx, "p/a", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	c := newPackCache(newPackBuffers())
	check := func(off, n int64, gets, ranges int64) {
		t.Helper()
		got, err := readVia(c, store, "p/a", off, n)
		end := min(off+n, int64(len(data)))
		if err != nil || !bytes.Equal(got, data[min(off, end):end]) {
			t.Fatalf("[%d, +%d): %q, %v", off, n, got, err)
		}
		if store.gets.Load() != gets || store.ranges.Load() != ranges {
			t.Fatalf("after [%d, +%d): %d gets, %d ranged; want %d, %d", off, n, store.gets.Load(), store.ranges.Load(), gets, ranges)
		}
	}
	check(5, 10, 0, 1)
	check(100, 7, 1, 1)
	check(9990, 100, 1, 1)
	check(20000, 5, 1, 1)

	// A chunk served from the copy once is read from the store again,
	// which may have changed (a check after damage).
	changed := bytes.Repeat([]byte("x"), len(data))
	if err := store.Put(ctx, "p/a", bytes.NewReader(changed), int64(len(changed))); err != nil {
		t.Fatal(err)
	}
	if got, err := readVia(c, store, "p/a", 100, 7); err != nil || string(got) != "xxxxxxx" {
		t.Fatalf("a chunk read again: %q, %v; want the store's bytes now", got, err)
	}
	check(200, 3, 1, 2) // not served from the copy yet: from it

	if _, err := readVia(c, store, "p/missing", 0, 1); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("missing pack, by range: %v", err)
	}
	if _, err := readVia(c, store, "p/missing", 0, 1); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("missing pack, whole: %v", err)
	}

	if err := store.Put(ctx, "p/b", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if _, err := readVia(c, store, "p/b", 0, 1); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.err = syscall.EIO
	store.mu.Unlock()
	if _, err := readVia(c, store, "p/b", 0, 1); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of a failing store: %v", err)
	}
	store.mu.Lock()
	store.err = nil
	store.mu.Unlock()
	gets := store.gets.Load()
	for range 3 { // by range, whole, from the cache
		if got, err := readVia(c, store, "p/b", 3, 4); err != nil || string(got) != "3456" {
			t.Fatalf("after the failure: %q, %v", got, err)
		}
	}
	if store.gets.Load() != gets+1 {
		t.Fatalf("%d whole reads after the failure, want 1: the failed one was kept", store.gets.Load()-gets)
	}
}

// TestPackCacheConcurrent: readers of many packs at once, in a cache too
// small for them, each get their own bytes while packs are dropped and
// their buffers reused (run with -race).
func TestPackCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	const packs, size = 6, 1 << 20
	contents := make([][]byte, packs)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte{byte(i + 1)}, size)
		for j := 0; j < size; j += 4096 {
			contents[i][j] = byte(j / 4096)
		}
		if err := store.Put(ctx, fmt.Sprintf("p/%d", i), bytes.NewReader(contents[i]), size); err != nil {
			t.Fatal(err)
		}
	}
	c := newPackCache(newPackBuffers())
	c.max = 2 * size
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				i := rng.IntN(packs)
				off := rng.Int64N(size - 5000)
				got, err := readVia(c, store, fmt.Sprintf("p/%d", i), off, 5000)
				if err != nil || !bytes.Equal(got, contents[i][off:off+5000]) {
					t.Errorf("pack %d at %d: %d bytes, %v", i, off, len(got), err)
					return
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes > c.max {
		t.Fatalf("cache holds %d bytes, more than its %d", c.bytes, c.max)
	}
}

// TestPackCacheDropsServedPacks: a pack whose every chunk was served
// leaves the cache at once, its buffer free for the next, rather than
// waiting for the least recently used to go; a chunk asked for again is
// read from the store.
func TestPackCacheDropsServedPacks(t *testing.T) {
	store := &countingStore{Store: mem.New()}
	data, entries := putPack(t, store, "p/a", 3, 1000)
	c := newPackCache(newPackBuffers())
	read := func(e pack.Entry) {
		t.Helper()
		got, err := readVia(c, store, "p/a", e.Offset, e.Length)
		if err != nil || !bytes.Equal(got, data[e.Offset:e.Offset+e.Length]) {
			t.Fatalf("chunk at %d: %d bytes, %v", e.Offset, len(got), err)
		}
	}
	read(entries[0]) // by range
	read(entries[1]) // whole
	c.mu.Lock()
	held := len(c.lru)
	c.mu.Unlock()
	if held != 1 {
		t.Fatalf("%d packs held after the second chunk, want 1", held)
	}
	read(entries[2]) // the last: the pack goes
	c.mu.Lock()
	held, size := len(c.lru), c.bytes
	_, known := c.packs["p/a"]
	c.mu.Unlock()
	if held != 0 || size != 0 || known {
		t.Fatalf("after every chunk was served: %d packs, %d bytes held, entry kept %v", held, size, known)
	}
	gets, ranges := store.gets.Load(), store.ranges.Load()
	read(entries[0])
	if store.gets.Load() != gets || store.ranges.Load() != ranges+1 {
		t.Fatalf("a chunk read again: %d whole reads, %d ranged more; want 0, 1", store.gets.Load()-gets, store.ranges.Load()-ranges)
	}
}

// TestPackCacheLends: a chunk served from a pack read whole is a part of
// the pack's buffer, not a copy, cut so that it cannot grow into the next
// chunk; the buffer goes back for the next pack only once the last chunk
// lent from it is returned, however often its release is called.
func TestPackCacheLends(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: mem.New()}
	data, entries := putPack(t, store, "p/a", 3, packBufSize/5)
	bufs := newPackBuffers()
	c := newPackCache(bufs)
	if _, err := readVia(c, store, "p/a", entries[0].Offset, entries[0].Length); err != nil { // by range
		t.Fatal(err)
	}
	var releases []func()
	for _, e := range entries[1:] {
		got, release, err := c.borrow(ctx, store, "p/a", e.Offset, e.Length)
		if err != nil || release == nil {
			t.Fatalf("chunk at %d: lent %v, %v", e.Offset, release != nil, err)
		}
		if !bytes.Equal(got, data[e.Offset:e.Offset+e.Length]) || cap(got) != len(got) {
			t.Fatalf("chunk at %d: %d bytes lent, capacity %d", e.Offset, len(got), cap(got))
		}
		releases = append(releases, release)
	}
	// Every chunk served: the pack left the cache, its buffer (a pack of
	// over half its size keeps it) still lent, and counted as held: with
	// as much held as the cache takes, chunks are copied, not lent.
	if len(bufs.free) != 0 {
		t.Fatal("the pack's buffer was free while chunks of it were lent")
	}
	c.max = packBufSize
	if c.mayLend() {
		t.Fatalf("lending with %d bytes of dropped packs held, the cache's %d", c.held, c.max)
	}
	releases[0]()
	releases[0]()
	if len(bufs.free) != 0 {
		t.Fatal("a second release of one chunk freed the buffer another still holds")
	}
	releases[1]()
	if len(bufs.free) != 1 {
		t.Fatalf("%d buffers free once every chunk came back, want 1", len(bufs.free))
	}
	if !c.mayLend() || c.held != 0 {
		t.Fatalf("not lending once every chunk came back (%d bytes held)", c.held)
	}
	// Asked again, a chunk is read from the store: nothing lent.
	if _, release, err := c.borrow(ctx, store, "p/a", entries[1].Offset, entries[1].Length); err != nil || release != nil {
		t.Fatalf("a chunk served before: lent %v, %v", release != nil, err)
	}
}

// putPack stores at key a pack of n chunks of size bytes each, and returns
// it and its entries.
func putPack(t *testing.T, store blob.Store, key string, n, size int) ([]byte, []pack.Entry) {
	t.Helper()
	var b pack.Builder
	var entries []pack.Entry
	for i := range n {
		id := bytes.Repeat([]byte{byte(i + 1)}, pack.IDSize)
		entries = append(entries, b.Add(id, bytes.Repeat([]byte{byte('a' + i)}, size)))
	}
	data := b.Finish()
	if err := store.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	return data, entries
}
