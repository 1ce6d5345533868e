package receiver

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/blob/mem"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

// sameRecords fails unless a and b hold the same records; with
// sequences, also at the same log sequences.
func sameRecords(t *testing.T, a, b []db.SealedRecord, sequences bool) {
	t.Helper()
	key := func(r db.SealedRecord) string { return string(r.Origin) + string(rune(r.Counter)) }
	m := make(map[string]db.SealedRecord)
	for _, r := range a {
		m[key(r)] = r
	}
	if len(a) != len(b) {
		t.Fatalf("%d records vs %d", len(a), len(b))
	}
	for _, r := range b {
		o, ok := m[key(r)]
		if !ok || !bytes.Equal(o.FileKey, r.FileKey) || !bytes.Equal(o.Sealed, r.Sealed) ||
			!bytes.Equal(o.Chunks, r.Chunks) || !o.StoredAt.Equal(r.StoredAt) || (sequences && o.Seq != r.Seq) {
			t.Fatalf("record %+v differs from %+v", r, o)
		}
	}
}

func TestReplicateBothWays(t *testing.T) {
	ctx := context.Background()
	t1, t2 := newTrusted(), newTrusted()
	n1 := newNode(t, localStore(t), t1.id)
	n2 := newNode(t, mem.New(), t2.id)
	n1.share(t, n2.id)
	n2.share(t, n1.id)
	for _, n := range []*node{n1, n2} {
		if err := n.r.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each receiver gets its own device's records; one chunk is in both.
	common := t1.addChunk(77)
	t2.chunks[string(common)] = t1.chunks[string(common)]
	for _, c := range []struct {
		n *node
		p *trusted
	}{{n1, t1}, {n2, t2}} {
		connectTrusted(t, c.n, c.p)
		if err := c.p.conn.ClusterConfig(ctx, clusterConfig(c.n, c.p, 0, 0)); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 5; i++ {
			c.p.send(t, record(c.p, uint64(i), byte(i), common, c.p.addChunk(i)))
		}
		testutil.Eventually(t, waitTimeout, "records stored", func() bool { return c.p.lastAck() == 5 })
	}

	s1, s2 := linkNodes(t, n1, n2)
	testutil.Eventually(t, waitTimeout, "both receivers to hold everything", func() bool {
		return len(n1.records(t)) == 10 && len(n2.records(t)) == 10
	})
	// Records that came back to where they started are not stored twice.
	st1, _ := n1.r.Status(ctx, folderID)
	st2, _ := n2.r.Status(ctx, folderID)
	if st1.Records != 10 || st2.Records != 10 || st1.Chunks != 11 || st2.Chunks != 11 || st1.LogSequence != 10 {
		t.Fatalf("status %+v and %+v", st1, st2)
	}
	sameRecords(t, n1.records(t), n2.records(t), false)
	c1, c2 := n1.chunkSizes(t), n2.chunkSizes(t)
	if len(c1) != len(c2) {
		t.Fatalf("chunk lists of %d and %d", len(c1), len(c2))
	}
	for id, size := range c1 {
		if c2[id] != size {
			t.Fatalf("chunk %x: %d vs %d bytes", id[:4], size, c2[id])
		}
		b1, err1 := n1.storedChunk(ctx, []byte(id))
		b2, err2 := n2.storedChunk(ctx, []byte(id))
		if err1 != nil || err2 != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("chunk %x bodies differ: %v, %v", id[:4], err1, err2)
		}
	}
	// Each receiver announces the other's records by origin.
	for _, d := range n2.r.ClusterFolders(ctx, n1.id)[0].GetDevices() {
		if bytes.Equal(d.GetDeviceId(), t1.id[:]) {
			t.Fatalf("t1 is not shared with n2 but listed")
		}
	}
	if o := st2.Origins; len(o) != 2 || o[0].MaxCounter != 5 || o[1].MaxCounter != 5 {
		t.Fatalf("origins on n2: %+v", o)
	}
	for _, s := range []*served{s1, s2} {
		select {
		case err := <-s.errc:
			t.Fatalf("connection ended: %v", err)
		default:
		}
	}
}

func TestRebuild(t *testing.T) {
	ctx := context.Background()
	reader := newTrusted()
	n, src := filled(t, 6, reader.id)
	// Two envelope generations and a record whose chunk went away.
	for i, env := range [][]byte{[]byte("one"), []byte("two")} {
		var prev []byte
		if i > 0 {
			s := sha256Sum([]byte("one"))
			prev = s[:]
		}
		if _, err := n.r.Request(ctx, src.id, &protocol.Request{Folder: folderID, Size: 100,
			Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_PUT, Envelope: env, Previous: prev}); err != nil {
			t.Fatal(err)
		}
	}
	gone := src.addChunk(3)
	src.send(t, record(src, 7, 7, gone))
	testutil.Eventually(t, waitTimeout, "ack", func() bool { return src.lastAck() == 7 })
	n.dropChunk(t, gone)
	src.send(t, record(src, 8, 8))
	testutil.Eventually(t, waitTimeout, "ack", func() bool { return src.lastAck() == 8 })

	if has, err := StoreHasFolders(ctx, n.store); !has || err != nil {
		t.Fatalf("StoreHasFolders = %v, %v", has, err)
	}
	if _, err := Rebuild(ctx, n.db, n.store, nil); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Rebuild into a database with folders: %v", err)
	}
	fresh := openDB(t)
	ids, err := Rebuild(ctx, fresh, n.store, nil)
	if err != nil || len(ids) != 1 || ids[0] != folderID {
		t.Fatalf("Rebuild = %v, %v", ids, err)
	}
	m := &node{id: n.id, db: fresh, store: n.store, r: New(n.id, fresh, n.store, nil)}
	if err := m.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if m.logID(t) != n.logID(t) {
		t.Fatal("log ID differs")
	}
	want := n.records(t)
	want = append(want[:6], want[7]) // the record whose chunk is gone is left out
	sameRecords(t, want, m.records(t), true)
	if c1, c2 := n.chunkSizes(t), m.chunkSizes(t); len(c2) != len(c1)-1 {
		t.Fatalf("chunk lists of %d and %d", len(c1), len(c2))
	} else {
		for id, size := range c2 {
			if c1[id] != size {
				t.Fatalf("chunk %x: %d vs %d", id[:4], c1[id], size)
			}
		}
	}
	env, gen, err := fresh.ReceiverEnvelope(ctx, folderID)
	if err != nil || string(env) != "two" || gen != 2 {
		t.Fatalf("envelope %q, generation %d, %v", env, gen, err)
	}
	f, err := fresh.Folder(ctx, folderID)
	if err != nil || f.Label != "Docs" || f.Path != "/srv/f" || f.Type != db.Encrypted {
		t.Fatalf("folder = %+v, %v", f, err)
	}
	devs, err := fresh.FolderDevices(ctx, folderID)
	if err != nil || len(devs) != 2 {
		t.Fatalf("shares = %v, %v", devs, err)
	}
	for _, id := range []crypt.DeviceID{reader.id, src.id} {
		d, err := fresh.Device(ctx, id.String())
		if err != nil || d.Name != "dev-"+id.String()[:4] || len(d.Addresses) != 1 {
			t.Fatalf("device %v = %+v, %v", id, d, err)
		}
	}
	// The rebuilt receiver serves the same cluster config.
	a, b := n.r.ClusterFolders(ctx, reader.id), m.r.ClusterFolders(ctx, reader.id)
	if !proto.Equal(a[0], b[0]) {
		t.Fatalf("cluster config %v, rebuilt %v", a[0], b[0])
	}
	// Its log continues after the old one's end.
	ms := &trusted{id: src.id, autoAck: true, chunks: src.chunks, requests: make(map[string]int)}
	connectTrusted(t, m, ms)
	if err := ms.conn.ClusterConfig(ctx, clusterConfig(m, ms, m.logID(t), 8)); err != nil {
		t.Fatal(err)
	}
	ms.send(t, record(ms, 9, 9))
	testutil.Eventually(t, waitTimeout, "ack", func() bool { return ms.lastAck() == 9 })
	if got := m.records(t); got[len(got)-1].Seq != 9 {
		t.Fatalf("next sequence after rebuild = %d", got[len(got)-1].Seq)
	}
}

func TestStoreHasFolders(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	put := func(key string, data []byte) {
		if err := s.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want bool) {
		t.Helper()
		if got, err := StoreHasFolders(ctx, s); got != want || err != nil {
			t.Fatalf("StoreHasFolders = %v, %v; want %v", got, err, want)
		}
	}
	check(false)
	put("other/x", []byte("x"))
	put("r/00/c/"+string(bytes.Repeat([]byte("ab"), 32)), []byte("x"))
	check(false)
	put("r/01/c/"+string(bytes.Repeat([]byte("ab"), 32)), []byte("x"))
	put("r/01/meta.json", []byte("{}"))
	check(true)
}

func TestRebuildRefusesCorruptStore(t *testing.T) {
	ctx := context.Background()
	n, _ := filled(t, 2)
	fk := folderKey(folderID)
	good, err := getLimited(ctx, n.store, logKey(fk, 1), maxLogSize)
	if err != nil {
		t.Fatal(err)
	}
	var idx protocol.SealedIndex
	if err := proto.Unmarshal(good, &idx); err != nil {
		t.Fatal(err)
	}
	idx.Records[0].Sequence = 2 // second object overlaps the first
	overlap, _ := proto.Marshal(&idx)
	cases := map[string]func(s blob.Store){
		"garbage log":       func(s blob.Store) { putBytes(t, s, logKey(fk, 3), []byte{0xff, 0xff}) },
		"overlapping log":   func(s blob.Store) { putBytes(t, s, logKey(fk, 2), overlap) },
		"misnamed log":      func(s blob.Store) { putBytes(t, s, "r/"+fk+"/log/zz", good) },
		"garbage meta":      func(s blob.Store) { putBytes(t, s, metaKey(fk), []byte("{")) },
		"bad chunk key":     func(s blob.Store) { putBytes(t, s, "r/"+fk+"/c/abcd", []byte("x")) },
		"bad envelope key":  func(s blob.Store) { putBytes(t, s, "r/"+fk+"/envelope/1", []byte("x")) },
		"empty envelope":    func(s blob.Store) { putBytes(t, s, envelopeKey(fk, 5), nil) },
		"meta of elsewhere": func(s blob.Store) { putBytes(t, s, "r/00/meta.json", []byte(`{"id":"f","logID":1}`)) },
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			s := mem.New()
			err := n.store.List(ctx, "", func(i blob.Info) error {
				data, err := getLimited(ctx, n.store, i.Key, maxLogSize)
				if err == nil {
					putBytes(t, s, i.Key, data)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			spoil(s)
			if _, err := Rebuild(ctx, openDB(t), s, nil); err == nil {
				t.Fatal("Rebuild accepted a corrupt store")
			}
		})
	}
}

func putBytes(t *testing.T, s blob.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseLog(f *testing.F) {
	origin := bytes.Repeat([]byte{1}, 32)
	good, _ := proto.Marshal(&protocol.SealedIndex{Folder: folderID, Records: []*protocol.SealedRecord{
		{Sequence: 1, Origin: origin, Counter: 1, FileKey: origin, Sealed: []byte("s"), Chunks: [][]byte{origin}, StoredNs: 5},
		{Sequence: 2, Origin: origin, Counter: 2, FileKey: origin, StoredNs: 6},
	}})
	f.Add("r/66/log/0000000000000001", good)
	f.Add("r/66/log/0000000000000002", good)
	f.Add("r/66/log/ffffffffffffffff", good)
	f.Add("r/66/log/0000000000000001", []byte{0x0a, 0x01})
	gap, _ := proto.Marshal(&protocol.SealedIndex{Folder: folderID, Records: []*protocol.SealedRecord{
		{Sequence: 3, Origin: origin, Counter: 1, FileKey: origin, StoredNs: 5},
		{Sequence: 7, Origin: origin, Counter: 2, FileKey: origin, StoredNs: 6},
	}})
	f.Add("r/66/log/0000000000000001", gap)
	f.Add("r/66/log/0000000000000004", gap)
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		recs, err := parseLog(folderID, key, data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		prev, _ := logFirst(key)
		prev--
		for i, r := range recs {
			if r.GetSequence() <= prev || checkRecord(r) != nil || r.GetStoredNs() <= 0 {
				t.Fatalf("accepted record %d: %v", i, r)
			}
			prev = r.GetSequence()
		}
		// What parses is storable: the conversion keeps every field.
		for _, w := range recs {
			want := proto.Clone(w).(*protocol.SealedRecord)
			want.ProtoReflect().SetUnknown(nil)
			got := toWire([]db.SealedRecord{fromWire(w, w.GetSequence(), timeOf(w))})[0]
			if !proto.Equal(got, want) {
				t.Fatalf("round trip %v -> %v", want, got)
			}
		}
	})
}

func FuzzParseMeta(f *testing.F) {
	m := meta{ID: folderID, Label: "Docs", Path: "/srv/f", LogID: 42,
		Devices: []metaDevice{{ID: crypt.DeviceID{1}, Name: "a", Addresses: []string{"dynamic"}}}}
	f.Add(folderKey(folderID), m.encode())
	f.Add(folderKey(folderID), []byte(`{"id":"f","logID":1,"devices":[{"id":"x"}]}`))
	f.Add("00", []byte(`{"id":"\u0000","logID":1}`))
	m.Retention = &metaRetention{KeepLast: 3, KeepDeletedDays: 7}
	m.HighWater = &metaHighWater{Sequence: 9, Counters: []metaCounter{{Origin: bytes.Repeat([]byte{2}, 32), Counter: 5}}}
	f.Add(folderKey(folderID), m.encode())
	f.Add(folderKey(folderID), []byte(`{"id":"f","logID":1,"highWater":{"sequence":1,"counters":[{"origin":"zz","counter":1}]}}`))
	f.Fuzz(func(t *testing.T, fk string, data []byte) {
		got, err := parseMeta(fk, data, nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if got.ID == "" || folderKey(got.ID) != fk || got.LogID == 0 {
			t.Fatalf("accepted %+v", got)
		}
		again, err := parseMeta(fk, got.encode(), nil)
		if err != nil || !bytes.Equal(again.encode(), got.encode()) {
			t.Fatalf("round trip of %+v: %v", got, err)
		}
	})
}

func timeOf(r *protocol.SealedRecord) time.Time { return time.Unix(0, r.GetStoredNs()) }
