package receiver

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/blob/mem"
	"lockstep/storage/blob/metered"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

// base is a Wednesday, half past noon, mid-month, mid-year (UTC): one
// minute before it is in the same hour, day, week, month and year.
var base = time.Date(2024, 6, 12, 12, 30, 0, 0, time.UTC)

// versions returns one file's versions at times, newest first, with
// sequences descending.
func versions(times ...time.Time) []db.SealedRecord {
	out := make([]db.SealedRecord, len(times))
	for i, t := range times {
		out[i] = db.SealedRecord{Seq: int64(len(times) - i), StoredAt: t}
	}
	return out
}

// twoPerBucket returns 2*n times, newest first: per bucket (stepped back
// by step) its start time and one minute before.
func twoPerBucket(n int, step func(time.Time, int) time.Time) []time.Time {
	var out []time.Time
	for i := range n {
		t := step(base, i)
		out = append(out, t, t.Add(-time.Minute))
	}
	return out
}

func TestPolicyKeeps(t *testing.T) {
	steps := map[string]struct {
		step func(time.Time, int) time.Time
		set  func(*Policy, int)
	}{
		"hourly":  {func(t time.Time, i int) time.Time { return t.Add(-time.Duration(i) * time.Hour) }, func(p *Policy, n int) { p.KeepHourly = n }},
		"daily":   {func(t time.Time, i int) time.Time { return t.AddDate(0, 0, -i) }, func(p *Policy, n int) { p.KeepDaily = n }},
		"weekly":  {func(t time.Time, i int) time.Time { return t.AddDate(0, 0, -7*i) }, func(p *Policy, n int) { p.KeepWeekly = n }},
		"monthly": {func(t time.Time, i int) time.Time { return t.AddDate(0, -i, 0) }, func(p *Policy, n int) { p.KeepMonthly = n }},
		"yearly":  {func(t time.Time, i int) time.Time { return t.AddDate(-i, 0, 0) }, func(p *Policy, n int) { p.KeepYearly = n }},
	}
	const buckets = 3
	for name, s := range steps {
		vs := versions(twoPerBucket(buckets, s.step)...)
		for _, n := range []int{buckets - 1, buckets, buckets + 1} {
			var p Policy
			s.set(&p, n)
			got := p.keeps(vs, base)
			// The newest of each of the first min(n, buckets) buckets.
			want := make([]bool, len(vs))
			for i := range min(n, buckets) {
				want[2*i] = true
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %d: keeps %v, want %v", name, n, got, want)
			}
		}
	}
	vs := versions(twoPerBucket(2, func(t time.Time, i int) time.Time { return t.Add(-time.Duration(i) * time.Hour) })...)
	for _, n := range []int{3, 4, 5} {
		got := Policy{KeepLast: n}.keeps(vs, base)
		for i, k := range got {
			if k != (i < n) {
				t.Errorf("KeepLast %d of %d: keeps %v", n, len(vs), got)
				break
			}
		}
	}
	// Rules add up: last 1 plus daily 2 over versions one hour apart on
	// two days.
	day := versions(base, base.Add(-time.Hour), base.AddDate(0, 0, -1), base.AddDate(0, 0, -1).Add(-time.Hour))
	if got := (Policy{KeepLast: 1, KeepDaily: 2}).keeps(day, base); !reflect.DeepEqual(got, []bool{true, false, true, false}) {
		t.Errorf("last 1 + daily 2: %v", got)
	}
	// The zero policy keeps everything.
	if got := (Policy{}).keeps(day, base); !reflect.DeepEqual(got, []bool{true, true, true, true}) {
		t.Errorf("zero policy: %v", got)
	}
}

func TestPolicyDeleted(t *testing.T) {
	const days = 7
	limit := base.Add(-days * 24 * time.Hour)
	for _, c := range []struct {
		stored  time.Time
		deleted bool
		p       Policy
		kept    int
	}{
		{limit.Add(-time.Second), true, Policy{KeepDeletedDays: days}, 0},
		{limit, true, Policy{KeepDeletedDays: days}, 3},
		{limit.Add(time.Second), true, Policy{KeepDeletedDays: days}, 3},
		{limit.Add(-time.Second), true, Policy{KeepDeletedDays: days, KeepLast: 2}, 0},
		{limit.Add(time.Second), true, Policy{KeepDeletedDays: days, KeepLast: 1}, 1},
		// Not a deletion, or no limit on deletions: the newest stays.
		{limit.Add(-time.Hour), false, Policy{KeepDeletedDays: days, KeepHourly: 1}, 1},
		{limit.Add(-time.Hour), true, Policy{KeepHourly: 1}, 1},
	} {
		vs := versions(c.stored, c.stored.Add(-time.Minute), c.stored.Add(-2*time.Minute))
		vs[0].Deleted = c.deleted
		got := c.p.keeps(vs, base)
		kept := 0
		for _, k := range got {
			if k {
				kept++
			}
		}
		if kept != c.kept || (kept > 0 && !got[0]) {
			t.Errorf("newest at limit%+v deleted=%v, %+v: keeps %v, want %d with the newest", c.stored.Sub(limit), c.deleted, c.p, got, c.kept)
		}
	}
}

// putChunk stores a random chunk of size bytes in n's store and returns
// its ID.
func (n *node) putChunk(t *testing.T, size int) []byte {
	t.Helper()
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	data := make([]byte, size)
	putBytes(t, n.store, chunkKey(folderKey(folderID), id), data)
	return id
}

// commitRecs appends recs to n's log as an ingest does, the chunks they
// reference being in the store already.
func (n *node) commitRecs(t *testing.T, recs ...*protocol.SealedRecord) {
	t.Helper()
	ctx := context.Background()
	f, err := n.r.held(folderID)
	if err != nil {
		t.Fatal(err)
	}
	fetched := make(map[string]db.SealedChunk)
	for _, w := range recs {
		for _, c := range w.GetChunks() {
			info, err := n.store.Stat(ctx, chunkKey(f.fk, c))
			if err != nil {
				t.Fatal(err)
			}
			fetched[string(c)] = db.SealedChunk{ID: c, Size: info.Size}
		}
	}
	if err := n.r.commit(ctx, f, recs, fetched, f.collected.Load()); err != nil {
		t.Fatal(err)
	}
}

// stamped is record with a stored time and deletion flag.
func stamped(p *trusted, counter uint64, file byte, at time.Time, deleted bool, chunks ...[]byte) *protocol.SealedRecord {
	w := record(p, counter, file, chunks...)
	w.StoredNs, w.Deleted = at.UnixNano(), deleted
	return w
}

// counters returns the ClusterConfig figures n announces to peer: its
// log sequence and the counter of each device.
func (n *node) counters(t *testing.T, peer crypt.DeviceID) (int64, map[crypt.DeviceID]int64) {
	t.Helper()
	fs := n.r.ClusterFolders(context.Background(), peer)
	if len(fs) != 1 {
		t.Fatalf("%d folders announced", len(fs))
	}
	out := make(map[crypt.DeviceID]int64)
	var seq int64
	for _, d := range fs[0].GetDevices() {
		if crypt.DeviceID(d.GetDeviceId()) == n.id {
			seq = d.GetMaxSequence()
			continue
		}
		out[crypt.DeviceID(d.GetDeviceId())] = d.GetMaxSequence()
	}
	return seq, out
}

func TestPrune(t *testing.T) {
	for name, store := range map[string]func(*testing.T) blob.Store{
		"local": localStore,
		"mem":   func(*testing.T) blob.Store { return mem.New() },
	} {
		t.Run(name, func(t *testing.T) { testPrune(t, store(t)) })
	}
}

func testPrune(t *testing.T, store blob.Store) {
	ctx := context.Background()
	p, q := newTrusted(), newTrusted()
	n := newNode(t, store, p.id, q.id)
	// Prunes run two hours ahead, so the chunks stored now are past
	// their grace.
	now := time.Now().Add(2 * time.Hour)
	old := now.Add(-48 * time.Hour)
	shared, a1, a2, a3, b1, gone := n.putChunk(t, 10), n.putChunk(t, 20), n.putChunk(t, 30), n.putChunk(t, 40), n.putChunk(t, 50), n.putChunk(t, 60)
	// File 1: three versions, an hour apart, sharing one chunk; file 2:
	// deleted two days ago; file 3: one version by q.
	n.commitRecs(t,
		stamped(p, 1, 1, old, false, shared, a1),
		stamped(p, 2, 1, old.Add(time.Hour), false, shared, a2),
		stamped(p, 3, 2, old, false, b1))
	n.commitRecs(t,
		stamped(p, 4, 2, old.Add(time.Minute), true),
		stamped(q, 1, 3, old, false, gone),
		stamped(p, 5, 1, old.Add(2*time.Hour), false, shared, a3))
	// An unreferenced chunk stored now, and one the DB lists, stored long ago.
	fresh := n.putChunk(t, 70)
	if err := n.db.AppendSealed(ctx, folderID, nil, []db.SealedChunk{
		{ID: fresh, Size: 70, StoredAt: now.Add(-time.Minute)}, {ID: bytes.Repeat([]byte{9}, 32), Size: 80, StoredAt: old}}); err != nil {
		t.Fatal(err)
	}
	putBytes(t, store, chunkKey(folderKey(folderID), bytes.Repeat([]byte{9}, 32)), make([]byte, 80))
	seqBefore, countersBefore := n.counters(t, p.id)
	if seqBefore != 6 || countersBefore[p.id] != 5 || countersBefore[q.id] != 1 {
		t.Fatalf("before: sequence %d, counters %v", seqBefore, countersBefore)
	}

	// File 1 keeps 2 (a1 goes, shared stays); file 2's deletion is older
	// than a day: both versions go (b1 goes); file 3 keeps its one.
	policy := Policy{KeepLast: 2, KeepDeletedDays: 1}
	if err := n.r.SetRetention(ctx, folderID, policy); err != nil {
		t.Fatal(err)
	}
	if got, err := n.r.Retention(ctx, folderID); err != nil || got != policy {
		t.Fatalf("Retention = %+v, %v", got, err)
	}
	want := PruneResult{Records: 3, Files: 1, Chunks: 3, Bytes: 20 + 50 + 80, Kept: 3}
	recsBefore, chunksBefore := n.records(t), n.chunkSizes(t)
	dry, err := n.r.Prune(ctx, folderID, PruneOptions{DryRun: true, Grace: time.Hour, Now: now})
	if err != nil || dry != want {
		t.Fatalf("dry run = %+v, %v; want %+v", dry, err, want)
	}
	if !reflect.DeepEqual(n.records(t), recsBefore) || !reflect.DeepEqual(n.chunkSizes(t), chunksBefore) {
		t.Fatal("a dry run changed the database")
	}
	// A policy tried before it is saved: keeping 3 of file 1 and the
	// deleted file's versions drops nothing but the unreferenced chunk.
	tried, err := n.r.Prune(ctx, folderID, PruneOptions{DryRun: true, Grace: time.Hour, Now: now, Try: &Policy{KeepLast: 3}})
	if want := (PruneResult{Chunks: 1, Bytes: 80, Kept: 6}); err != nil || tried != want {
		t.Fatalf("dry run of another policy = %+v, %v; want %+v", tried, err, want)
	}
	if got, _ := n.r.Retention(ctx, folderID); got != policy {
		t.Fatalf("trying a policy saved it: %+v", got)
	}
	if _, err := n.r.Prune(ctx, folderID, PruneOptions{Grace: time.Hour, Now: now, Try: &Policy{KeepLast: 3}}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("a real prune with a policy to try: %v", err)
	}
	got, err := n.r.Prune(ctx, folderID, PruneOptions{Grace: time.Hour, Now: now})
	if err != nil || got != want {
		t.Fatalf("Prune = %+v, %v; want %+v", got, err, want)
	}
	var left []uint64
	for _, r := range n.records(t) {
		left = append(left, r.Counter)
	}
	if !reflect.DeepEqual(left, []uint64{2, 1, 5}) {
		t.Fatalf("counters left %v, want [2 1 5]", left)
	}
	for id, wantHeld := range map[string]bool{string(shared): true, string(a2): true, string(a3): true, string(gone): true,
		string(fresh): true, string(a1): false, string(b1): false, string(bytes.Repeat([]byte{9}, 32)): false} {
		_, inDB := n.chunkSizes(t)[id]
		_, err := store.Stat(ctx, chunkKey(folderKey(folderID), []byte(id)))
		if inDB != wantHeld || (err == nil) != wantHeld {
			t.Errorf("chunk %x: in DB %v, in store %v; want %v", id[:4], inDB, err, wantHeld)
		}
	}
	if _, err := n.r.Request(ctx, p.id, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK,
		Folder: folderID, ChunkId: a1, Size: 1 << 20}); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("request of a collected chunk: %v, want ErrNoSuchFile", err)
	}
	// Pruning again drops nothing; the fresh chunk goes once it is older
	// than the grace.
	freshAt := now.Add(-time.Minute)
	for _, c := range []struct {
		at   time.Time
		want PruneResult
	}{
		{freshAt.Add(time.Hour - time.Second), PruneResult{Kept: 3}},
		{freshAt.Add(time.Hour), PruneResult{Kept: 3}},
		{freshAt.Add(time.Hour + time.Second), PruneResult{Kept: 3, Chunks: 1, Bytes: 70}},
	} {
		if got, err := n.r.Prune(ctx, folderID, PruneOptions{Grace: time.Hour, Now: c.at}); err != nil || got != c.want {
			t.Fatalf("Prune at fresh+%v = %+v, %v; want %+v", c.at.Sub(freshAt), got, err, c.want)
		}
	}
	if _, err := store.Stat(ctx, chunkKey(folderKey(folderID), fresh)); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("collected chunk still in the store: %v", err)
	}

	// Pruning q's only file and p's newest counter leaves them announced.
	if err := n.r.SetRetention(ctx, folderID, Policy{KeepDeletedDays: 1}); err != nil {
		t.Fatal(err)
	}
	n.commitRecs(t, stamped(q, 2, 3, old.Add(time.Minute), true))
	if _, err := n.r.Prune(ctx, folderID, PruneOptions{Grace: time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	seq, counters := n.counters(t, p.id)
	if seq != 7 || counters[p.id] != 5 || counters[q.id] != 2 {
		t.Fatalf("after pruning q's file: sequence %d, counters %v; want 7, p 5, q 2", seq, counters)
	}
	if st, err := n.r.Status(ctx, folderID); err != nil || st.LogSequence != 7 {
		t.Fatalf("status = %+v, %v", st, err)
	}
	// A pruned record sent again is not taken back; a new one continues
	// the log after the highest sequence.
	n.commitRecs(t, stamped(q, 2, 3, now, true), stamped(q, 3, 4, now, false))
	recs := n.records(t)
	if last := recs[len(recs)-1]; len(recs) != 3 || last.Counter != 3 || last.Seq != 8 {
		t.Fatalf("after pruning, records %+v", recs)
	}

	// Rebuild from the store alone gives the pruned state, marks and
	// policy.
	m := &node{id: n.id, db: openDB(t), store: store}
	if _, err := Rebuild(ctx, m.db, store, nil); err != nil {
		t.Fatal(err)
	}
	m.r = New(m.id, m.db, store, nil)
	if err := m.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, n.records(t), m.records(t), true)
	if !reflect.DeepEqual(n.chunkSizes(t), m.chunkSizes(t)) {
		t.Fatalf("rebuilt chunks %v, want %v", m.chunkSizes(t), n.chunkSizes(t))
	}
	seqN, countersN := n.counters(t, p.id)
	seqM, countersM := m.counters(t, p.id)
	if seqN != seqM || !reflect.DeepEqual(countersN, countersM) {
		t.Fatalf("rebuilt announces %d %v, want %d %v", seqM, countersM, seqN, countersN)
	}
	if got, err := m.r.Retention(ctx, folderID); err != nil || got != (Policy{KeepDeletedDays: 1}) {
		t.Fatalf("rebuilt retention %+v, %v", got, err)
	}
}

func TestPruneRefuses(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, mem.New())
	if _, err := n.r.Prune(ctx, "other", PruneOptions{}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Prune of a folder not held: %v", err)
	}
	if _, err := n.r.Prune(ctx, folderID, PruneOptions{Grace: -time.Second}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("negative grace: %v", err)
	}
	if err := n.r.SetRetention(ctx, folderID, Policy{KeepDaily: -1}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("negative policy: %v", err)
	}
	if err := n.r.SetRetention(ctx, "other", Policy{}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("SetRetention of a folder not held: %v", err)
	}
	if got, err := n.r.Retention(ctx, folderID); err != nil || got != (Policy{}) {
		t.Fatalf("Retention before any set = %+v, %v", got, err)
	}
}

// TestPruneDuringIngest prunes in a loop while a device uploads versions
// of few files, each with a chunk of its own and one shared by all: every
// record the receiver holds afterwards has its chunks in the database and
// the store.
func TestPruneDuringIngest(t *testing.T) {
	ctx := context.Background()
	p := newTrusted()
	n := newNode(t, localStore(t), p.id)
	sharing(t, n, p)
	if err := n.r.SetRetention(ctx, folderID, Policy{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	shared := p.addChunk(10)
	const total = 200
	done := make(chan error, 1)
	go func() {
		var err error
		for p.lastAck() < total && err == nil {
			// Grace 1ns: every unreferenced chunk is garbage at once.
			_, err = n.r.Prune(ctx, folderID, PruneOptions{Grace: time.Nanosecond, Now: time.Now().Add(time.Hour)})
		}
		done <- err
	}()
	for c := uint64(1); c <= total; c += 4 {
		var recs []*protocol.SealedRecord
		for i := range uint64(4) {
			recs = append(recs, record(p, c+i, byte((c+i)%3), shared, p.addChunk(20)))
		}
		p.send(t, recs...)
		testutil.Eventually(t, waitTimeout, fmt.Sprintf("ack of %d", c+3), func() bool { return p.lastAck() >= int64(c+3) })
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	chunks := n.chunkSizes(t)
	for _, r := range n.records(t) {
		for off := 0; off < len(r.Chunks); off += 32 {
			id := r.Chunks[off : off+32]
			if _, ok := chunks[string(id)]; !ok {
				t.Fatalf("record %d references chunk %x, not in the database", r.Seq, id[:4])
			}
			if _, err := n.storedChunk(ctx, id); err != nil {
				t.Fatalf("record %d references chunk %x: %v", r.Seq, id[:4], err)
			}
		}
	}
	seq, counters := n.counters(t, p.id)
	if seq != total || counters[p.id] != total {
		t.Fatalf("announces sequence %d, counter %d; want %d", seq, counters[p.id], total)
	}
}

// BenchmarkPrune10k prunes a folder of 10,000 records (1,000 files of 10
// versions, one chunk each) down to 2 versions per file.
func BenchmarkPrune10k(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		n := benchNode(b)
		b.StartTimer()
		res, err := n.r.Prune(ctx, folderID, PruneOptions{Grace: time.Hour, Now: time.Now().Add(2 * time.Hour)})
		if err != nil || res.Records != 8000 || res.Chunks != 8000 {
			b.Fatalf("Prune = %+v, %v", res, err)
		}
	}
}

// benchNode makes a receiver whose folder holds 10,000 records.
func benchNode(b *testing.B) *node {
	ctx := context.Background()
	d, err := db.Open(b.TempDir() + "/lockstep.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	if err := d.PutFolder(ctx, db.Folder{ID: folderID, Label: "Docs", Path: "/srv/f", Type: db.Encrypted}); err != nil {
		b.Fatal(err)
	}
	n := &node{id: randomID(), db: d, store: mem.New()}
	n.r = New(n.id, d, n.store, nil)
	if err := n.r.Reload(ctx); err != nil {
		b.Fatal(err)
	}
	if err := n.r.SetRetention(ctx, folderID, Policy{KeepLast: 2}); err != nil {
		b.Fatal(err)
	}
	f, _ := n.r.held(folderID)
	p := newTrusted()
	start := time.Now().Add(-time.Hour)
	for batch := range 10 {
		var recs []*protocol.SealedRecord
		fetched := make(map[string]db.SealedChunk)
		for file := range 1000 {
			c := make([]byte, 32)
			_, _ = rand.Read(c)
			if err := n.store.Put(ctx, chunkKey(f.fk, c), bytes.NewReader([]byte{1}), 1); err != nil {
				b.Fatal(err)
			}
			fetched[string(c)] = db.SealedChunk{ID: c, Size: 1}
			w := record(p, uint64(batch*1000+file+1), 0, c)
			w.FileKey[1], w.FileKey[2] = byte(file), byte(file>>8)
			w.StoredNs = start.Add(time.Duration(batch) * time.Minute).UnixNano()
			recs = append(recs, w)
		}
		if err := n.r.commit(ctx, f, recs, fetched, f.collected.Load()); err != nil {
			b.Fatal(err)
		}
	}
	return n
}

// TestCollectBatchesDeletes: garbage collection on S3 deletes its chunks
// in one DeleteObjects request, not one request (and a HEAD) each, and
// keeps what it must.
func TestCollectBatchesDeletes(t *testing.T) {
	ctx := context.Background()
	meter := metered.NewMeter()
	store := metered.New(s3Store(t), meter)
	p := newTrusted()
	n := newNode(t, store, p.id)
	old := time.Now().Add(-48 * time.Hour)
	var garbage []db.SealedChunk
	for range 40 {
		garbage = append(garbage, db.SealedChunk{ID: n.putChunk(t, 200<<10), Size: 200 << 10, StoredAt: old})
	}
	kept := n.putChunk(t, 64)
	n.commitRecs(t, stamped(p, 1, 1, old, false, kept))
	if err := n.db.AppendSealed(ctx, folderID, nil, garbage); err != nil {
		t.Fatal(err)
	}
	before := meter.Snapshot()
	res, err := n.r.Prune(ctx, folderID, PruneOptions{Grace: time.Hour})
	if err != nil || res.Chunks != 40 {
		t.Fatalf("prune = %+v, %v; want 40 chunks collected", res, err)
	}
	after := meter.Snapshot()
	if d := after.Delete.Requests - before.Delete.Requests; d != 1 {
		t.Errorf("collecting 40 chunks took %d DELETE requests, want 1", d)
	}
	for _, c := range garbage {
		if _, err := store.Stat(ctx, chunkKey(folderKey(folderID), c.ID)); !errors.Is(err, blob.ErrNotExist) {
			t.Fatalf("collected chunk %x still in the store: %v", c.ID[:4], err)
		}
	}
	if _, err := store.Stat(ctx, chunkKey(folderKey(folderID), kept)); err != nil {
		t.Fatalf("the kept chunk: %v", err)
	}
	if sizes := n.chunkSizes(t); len(sizes) != 1 {
		t.Fatalf("%d chunk rows after the prune, want the kept one", len(sizes))
	}
}
