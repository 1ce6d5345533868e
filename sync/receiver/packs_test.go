package receiver

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/blob/s3"
	"lockstep/storage/blob/s3/s3test"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/sync/receiver/pack"
	"lockstep/test/testutil"
)

// storedChunk reads chunk id of folderID the way n serves it.
func (n *node) storedChunk(ctx context.Context, id []byte) ([]byte, error) {
	f, err := n.r.held(folderID)
	if err != nil {
		return nil, err
	}
	return n.r.chunkBody(ctx, f, id, 1<<20)
}

// dropChunk deletes chunk id from n's store: its blob, or its pack, which
// must hold no other chunk.
func (n *node) dropChunk(t *testing.T, id []byte) {
	t.Helper()
	ctx := context.Background()
	loc, err := n.db.SealedChunk(ctx, folderID, id)
	if err != nil {
		t.Fatal(err)
	}
	key := chunkKey(folderKey(folderID), id)
	if loc.Pack != nil {
		key = packKey(folderKey(folderID), loc.Pack)
		if in, err := n.db.PackedChunks(ctx, folderID, loc.Pack); err != nil || len(in) != 1 {
			t.Fatalf("the pack of chunk %x holds %d chunks (%v)", id[:4], len(in), err)
		}
	}
	if err := n.store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// objects counts n's chunk blobs and packs in its store, and returns the
// pack infos.
func (n *node) objects(t *testing.T) (chunks int, packs []blob.Info) {
	t.Helper()
	fk := folderKey(folderID)
	err := n.store.List(context.Background(), "r/"+fk+"/", func(i blob.Info) error {
		switch {
		case strings.HasPrefix(i.Key, "r/"+fk+"/c/"):
			chunks++
		case strings.HasPrefix(i.Key, "r/"+fk+"/p/"):
			packs = append(packs, i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return chunks, packs
}

// served checks that every chunk of p is served by n byte-exact, through
// Request as a peer asks.
func (n *node) checkServed(t *testing.T, p *trusted, ids [][]byte) {
	t.Helper()
	for _, id := range ids {
		got, err := n.r.Request(context.Background(), p.id, &protocol.Request{Folder: folderID,
			Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, ChunkId: id, Size: 1 << 22})
		p.mu.Lock()
		want := p.chunks[string(id)]
		p.mu.Unlock()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("chunk %x served as %d bytes (%v), want its %d", id[:4], len(got), err, len(want))
		}
	}
}

func s3Store(t *testing.T) blob.Store {
	t.Helper()
	s, err := s3.New(context.Background(), s3test.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestIngestPacks: many small chunks are stored as few packs, chunks at
// and above the threshold as blobs of their own (threshold-1, threshold,
// threshold+1), all served byte-exact, from a local directory and S3.
func TestIngestPacks(t *testing.T) {
	for name, open := range map[string]func(*testing.T) blob.Store{"local": localStore, "s3": s3Store} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := newTrusted()
			n := newNode(t, open(t), p.id)
			const below = 1000
			n.r.packBelow.Store(below)
			sharing(t, n, p)
			var ids [][]byte
			var want int64
			counter := uint64(0)
			for batch := range 3 {
				var recs []*protocol.SealedRecord
				for i := range 200 {
					size := 1 + (batch*200+i)*7%(below-1)
					ids = append(ids, p.addChunk(size))
					want += int64(size)
					counter++
					recs = append(recs, record(p, counter, byte(i), ids[len(ids)-1]))
				}
				p.send(t, recs...)
				testutil.Eventually(t, waitTimeout, "batch stored", func() bool { return p.lastAck() == int64(counter) })
			}
			var big [][]byte
			for _, size := range []int{below - 1, below, below + 1} {
				big = append(big, p.addChunk(size))
				want += int64(size)
			}
			counter++
			p.send(t, record(p, counter, 0, big...))
			testutil.Eventually(t, waitTimeout, "big chunks stored", func() bool { return p.lastAck() == int64(counter) })

			chunks, packs := n.objects(t)
			if chunks != 2 || len(packs) != 4 {
				t.Fatalf("%d chunk blobs and %d packs, want 2 (the chunks at and above the threshold) and 4 (one per batch)", chunks, len(packs))
			}
			for _, id := range big[1:] {
				if loc, err := n.db.SealedChunk(ctx, folderID, id); err != nil || loc.Pack != nil {
					t.Fatalf("chunk at or above the threshold: %+v, %v", loc, err)
				}
			}
			if loc, err := n.db.SealedChunk(ctx, folderID, big[0]); err != nil || loc.Pack == nil {
				t.Fatalf("chunk just below the threshold: %+v, %v", loc, err)
			}
			n.checkServed(t, p, append(ids, big...))
			st, err := n.r.Status(ctx, folderID)
			if err != nil || st.Chunks != int64(len(ids)+3) || st.StoredBytes != want || st.ReferencedBytes != want {
				t.Fatalf("status %+v, %v; want %d chunks of %d bytes", st, err, len(ids)+3, want)
			}
			// Each pack parses and lists exactly the chunks the database
			// places in it.
			for _, info := range packs {
				entries, err := pack.ReadIndex(ctx, n.store, info.Key, info.Size)
				if err != nil {
					t.Fatal(err)
				}
				id, _ := packIDOf(info.Key)
				rows, err := n.db.PackedChunks(ctx, folderID, id)
				if err != nil || len(rows) != len(entries) {
					t.Fatalf("pack %s: %d entries, %d rows (%v)", info.Key, len(entries), len(rows), err)
				}
				for i, e := range entries {
					if !bytes.Equal(e.ID, rows[i].ID) || e.Offset != rows[i].Offset || e.Length != rows[i].Size {
						t.Fatalf("pack %s entry %d = %+v, row %+v", info.Key, i, e, rows[i])
					}
				}
			}
		})
	}
}

// TestRebuildPacks: a database rebuilt from a store with packs places
// every chunk where it was and serves it byte-exact; a pack that does not
// parse is skipped, and the records needing its chunks left out.
func TestRebuildPacks(t *testing.T) {
	ctx := context.Background()
	p := newTrusted()
	n := newNode(t, localStore(t), p.id)
	sharing(t, n, p)
	var ids [][]byte
	var recs []*protocol.SealedRecord
	for i := range 50 {
		ids = append(ids, p.addChunk(100+i))
		recs = append(recs, record(p, uint64(i+1), byte(i), ids[i]))
	}
	ids = append(ids, p.addChunk(defaultPackBelow))
	recs = append(recs, record(p, 51, 0, ids[50]))
	p.send(t, recs...)
	testutil.Eventually(t, waitTimeout, "stored", func() bool { return p.lastAck() == 51 })
	lost := p.addChunk(10)
	p.send(t, record(p, 52, 52, lost))
	testutil.Eventually(t, waitTimeout, "stored", func() bool { return p.lastAck() == 52 })
	lostAt, err := n.db.SealedChunk(ctx, folderID, lost)
	if err != nil || lostAt.Pack == nil {
		t.Fatalf("chunk %+v, %v", lostAt, err)
	}
	// The last pack is damaged past parsing; a junk pack appears too.
	key := packKey(folderKey(folderID), lostAt.Pack)
	data, err := getLimited(ctx, n.store, key, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	putBytes(t, n.store, key, data)
	putBytes(t, n.store, packKey(folderKey(folderID), bytes.Repeat([]byte{7}, db.PackIDSize)), []byte("junk"))

	fresh := openDB(t)
	if _, err := Rebuild(ctx, fresh, n.store, nil); err != nil {
		t.Fatal(err)
	}
	m := &node{id: n.id, db: fresh, store: n.store, r: New(n.id, fresh, n.store, nil)}
	if err := m.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(m.records(t)); got != 51 {
		t.Fatalf("rebuilt %d records, want 51 (the one in the damaged pack left out)", got)
	}
	for _, id := range ids {
		a, err1 := n.db.SealedChunk(ctx, folderID, id)
		b, err2 := fresh.SealedChunk(ctx, folderID, id)
		if err1 != nil || err2 != nil || !bytes.Equal(a.Pack, b.Pack) || a.Offset != b.Offset || a.Size != b.Size {
			t.Fatalf("chunk %x: %+v (%v) before, %+v (%v) rebuilt", id[:4], a, err1, b, err2)
		}
	}
	m.checkServed(t, p, ids)
	if _, err := fresh.SealedChunk(ctx, folderID, lost); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("chunk of the damaged pack: %v", err)
	}
}

// packedNode is a node holding two files: file 1 references chunk a, file
// 2 an old version referencing chunk b and a newer one referencing
// nothing, a and b in one pack. With KeepLast 1 a prune makes b garbage.
func packedNode(t *testing.T, a, b int) (*node, *trusted, []byte, []byte, blob.Info) {
	t.Helper()
	ctx := context.Background()
	p := newTrusted()
	n := newNode(t, localStore(t), p.id)
	sharing(t, n, p)
	if err := n.r.SetRetention(ctx, folderID, Policy{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	ca, cb := p.addChunk(a), p.addChunk(b)
	old := time.Now().Add(-time.Minute)
	p.send(t, stamped(p, 1, 1, old, false, ca), stamped(p, 2, 2, old, false, cb), stamped(p, 3, 2, time.Now(), false))
	testutil.Eventually(t, waitTimeout, "stored", func() bool { return p.lastAck() == 3 })
	_, packs := n.objects(t)
	if len(packs) != 1 {
		t.Fatalf("%d packs", len(packs))
	}
	return n, p, ca, cb, packs[0]
}

// TestRepackBoundary: a pack whose live bytes fall below half its size is
// repacked (live = half - 1), one at exactly half or above is not; a
// dry run changes nothing and tells the same.
func TestRepackBoundary(t *testing.T) {
	ctx := context.Background()
	const b = 5000
	// The pack's size is a + b + 2 entries + the footer.
	half := func(a int) int { return (a + b + 2*pack.EntrySize + pack.FooterSize) }
	for _, c := range []struct {
		a      int
		repack bool
	}{
		{b + 2*pack.EntrySize + pack.FooterSize - 1, true}, // 2a = size - 1
		{b + 2*pack.EntrySize + pack.FooterSize, false},    // 2a = size
		{b + 2*pack.EntrySize + pack.FooterSize + 1, false},
	} {
		n, p, ca, cb, old := packedNode(t, c.a, b)
		if int(old.Size) != half(c.a) {
			t.Fatalf("pack of %d bytes, want %d", old.Size, half(c.a))
		}
		o := PruneOptions{Grace: time.Nanosecond, Now: time.Now().Add(time.Hour)}
		dry := o
		dry.DryRun = true
		want := 0
		if c.repack {
			want = 1
		}
		res, err := n.r.Prune(ctx, folderID, dry)
		if err != nil || res.Repacked != want || res.Chunks != 1 || res.Packs != 0 {
			t.Fatalf("a=%d: dry run %+v, %v", c.a, res, err)
		}
		if _, packs := n.objects(t); len(packs) != 1 || packs[0] != old {
			t.Fatalf("the dry run changed the packs: %v", packs)
		}
		res, err = n.r.Prune(ctx, folderID, o)
		if err != nil || res.Repacked != want || res.Chunks != 1 {
			t.Fatalf("a=%d: prune %+v, %v", c.a, res, err)
		}
		_, packs := n.objects(t)
		if len(packs) != 1 {
			t.Fatalf("a=%d: %d packs after the prune", c.a, len(packs))
		}
		if c.repack {
			if packs[0].Key == old.Key || packs[0].Size != int64(c.a+pack.EntrySize+pack.FooterSize) {
				t.Fatalf("a=%d: after the repack %+v (was %+v)", c.a, packs[0], old)
			}
		} else if packs[0].Key != old.Key {
			t.Fatalf("a=%d: repacked at or above half", c.a)
		}
		n.checkServed(t, p, [][]byte{ca})
		if _, err := n.db.SealedChunk(ctx, folderID, cb); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("collected chunk still listed: %v", err)
		}
		if st, _ := n.r.Status(ctx, folderID); st.Chunks != 1 || st.StoredBytes != int64(c.a) {
			t.Fatalf("status %+v", st)
		}
		// A second prune finds nothing more to do.
		if res, err := n.r.Prune(ctx, folderID, o); err != nil || res.Repacked != 0 || res.Packs != 0 {
			t.Fatalf("second prune %+v, %v", res, err)
		}
	}
}

// TestOrphanPacks: a pack written without its commit (a crash between
// the two) is deleted by a prune once older than the grace period, never
// before, and never while an ingest has it pending; a pack whose chunks
// all went is deleted too.
func TestOrphanPacks(t *testing.T) {
	ctx := context.Background()
	// a above half: the pack stays when b goes.
	n, p, ca, cb, full := packedNode(t, 4000, 3000)
	f, _ := n.r.held(folderID)

	// A pack an ingest wrote before the process died: not pending.
	crashed := &packer{store: n.store, f: f, target: defaultPackTarget}
	if _, err := crashed.add(ctx, bytes.Repeat([]byte{1}, 32), []byte("orphan")); err != nil {
		t.Fatal(err)
	}
	if err := crashed.flush(ctx); err != nil {
		t.Fatal(err)
	}
	crashed.release()
	// And one an ingest has pending.
	pending := &packer{store: n.store, f: f, target: defaultPackTarget}
	defer pending.release()
	if _, err := pending.add(ctx, bytes.Repeat([]byte{2}, 32), []byte("pending")); err != nil {
		t.Fatal(err)
	}
	if err := pending.flush(ctx); err != nil {
		t.Fatal(err)
	}
	// After a restart: a new receiver on the same database and store.
	m := &node{id: n.id, db: n.db, store: n.store, r: New(n.id, n.db, n.store, nil)}
	if err := m.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	mf, _ := m.r.held(folderID)
	mf.pending = map[string]bool{string(pending.claimed[0]): true}

	res, err := m.r.Prune(ctx, folderID, PruneOptions{Grace: time.Hour})
	if err != nil || res.Packs != 0 {
		t.Fatalf("prune within the grace period: %+v, %v", res, err)
	}
	if _, packs := m.objects(t); len(packs) != 3 {
		t.Fatalf("%d packs, want 3", len(packs))
	}
	res, err = m.r.Prune(ctx, folderID, PruneOptions{Grace: time.Hour, Now: time.Now().Add(2 * time.Hour)})
	if err != nil || res.Packs != 1 {
		t.Fatalf("prune past the grace period: %+v, %v", res, err)
	}
	_, packs := m.objects(t)
	if len(packs) != 2 {
		t.Fatalf("%d packs after the sweep, want the committed and the pending one", len(packs))
	}
	for _, info := range packs {
		if id, _ := packIDOf(info.Key); info.Key != full.Key && !bytes.Equal(id, pending.claimed[0]) {
			t.Fatalf("pack %s left", info.Key)
		}
	}
	m.checkServed(t, p, [][]byte{ca})

	if _, err := m.db.SealedChunk(ctx, folderID, cb); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("chunk b still listed: %v", err)
	}

	// Once every chunk of the committed pack is garbage, it goes.
	if err := m.db.PruneSealed(ctx, folderID, []int64{1}, db.ReceiverHighWater{}); err != nil {
		t.Fatal(err)
	}
	res, err = m.r.Prune(ctx, folderID, PruneOptions{Grace: time.Nanosecond, Now: time.Now().Add(time.Hour)})
	if err != nil || res.Packs != 1 || res.Chunks != 1 {
		t.Fatalf("prune of the last chunk: %+v, %v", res, err)
	}
	if _, packs := m.objects(t); len(packs) != 1 || packs[0].Key == full.Key {
		t.Fatalf("packs left: %v", packs)
	}
}
