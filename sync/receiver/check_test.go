package receiver

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/storage/blob"
	"lockstep/storage/blob/local"
	"lockstep/storage/blob/mem"
	"lockstep/storage/blob/metered"
	"lockstep/storage/db"
	"lockstep/sync/check"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

// checkFixture is a receiver filled by real ingests for Check's tests:
// three appends (log objects at 1, 12 and 23), two packs of small chunks,
// three loose chunks, an envelope and the meta object: ten objects.
type checkFixture struct {
	n     *node
	p     *trusted
	dir   string // the local store's directory, "" for S3
	fk    string
	small [][]byte // packed chunks, the first ten in the first pack
	big   [][]byte // loose chunks; big[0] is needed by records 11 and 21
	env   []byte
}

// checkStores are the stores Check's tests run on.
var checkStores = map[string]func(*testing.T) (blob.Store, string){
	"local": func(t *testing.T) (blob.Store, string) {
		dir := t.TempDir()
		s, err := local.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, dir
	},
	"s3": func(t *testing.T) (blob.Store, string) { return s3Store(t), "" },
}

const checkObjects = 10

func fillForCheck(t *testing.T, store blob.Store, dir string) *checkFixture {
	t.Helper()
	ctx := context.Background()
	p := newTrusted()
	n := newNode(t, store, p.id)
	n.r.packBelow.Store(1000)
	sharing(t, n, p)
	fx := &checkFixture{n: n, p: p, dir: dir, fk: folderKey(folderID)}
	var counter uint64
	send := func(recs ...*protocol.SealedRecord) {
		p.send(t, recs...)
		testutil.Eventually(t, waitTimeout, "append stored", func() bool { return p.lastAck() == int64(counter) })
	}
	rec := func(file byte, chunks ...[]byte) *protocol.SealedRecord {
		counter++
		return record(p, counter, file, chunks...)
	}
	var recs []*protocol.SealedRecord
	for i := range 10 {
		fx.small = append(fx.small, p.addChunk(100+i))
		recs = append(recs, rec(byte(i), fx.small[i]))
	}
	fx.big = append(fx.big, p.addChunk(2000), p.addChunk(3000))
	send(append(recs, rec(20, fx.big[0], fx.big[1]))...)
	recs = nil
	for i := range 10 {
		fx.small = append(fx.small, p.addChunk(200+i))
		recs = append(recs, rec(byte(i), fx.small[10+i]))
	}
	fx.big = append(fx.big, p.addChunk(1500))
	send(append(recs, rec(21, fx.big[0], fx.big[2]))...)
	send(rec(30), rec(31), rec(32))

	fx.env = []byte("the folder key envelope")
	if _, err := n.r.Request(ctx, p.id, &protocol.Request{Folder: folderID, Size: 100,
		Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_PUT, Envelope: fx.env}); err != nil {
		t.Fatal(err)
	}
	return fx
}

// check runs Check with o.
func (fx *checkFixture) check(t *testing.T, o CheckOptions) check.Report {
	t.Helper()
	rep, err := fx.n.r.Check(context.Background(), folderID, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Mode != "store" || rep.Folder != folderID || rep.Receiver != "" || rep.Started.IsZero() {
		t.Fatalf("report header %+v", rep)
	}
	return rep
}

// packOf returns the key of the pack the database places chunk id in.
func (fx *checkFixture) packOf(t *testing.T, id []byte) string {
	t.Helper()
	loc, err := fx.n.db.SealedChunk(context.Background(), folderID, id)
	if err != nil || loc.Pack == nil {
		t.Fatalf("chunk %x: %+v, %v", id[:4], loc, err)
	}
	return packKey(fx.fk, loc.Pack)
}

// old makes the object key older than the default grace period and
// returns the options of a check that sees it so: on a local store its
// file is made last written two hours ago; S3 sets its own times, so the
// check is run two hours ahead instead.
func (fx *checkFixture) old(t *testing.T, key string) CheckOptions {
	t.Helper()
	if fx.dir == "" {
		return CheckOptions{Now: time.Now().Add(2 * time.Hour)}
	}
	ago := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(localPath(fx.dir, key), ago, ago); err != nil {
		t.Fatal(err)
	}
	return CheckOptions{}
}

// localPath is where a local store in dir keeps key: a last segment of
// 4 bytes or more goes into a shard directory of its first two.
func localPath(dir, key string) string {
	i := strings.LastIndexByte(key, '/')
	parent, name := key[:i], key[i+1:]
	if len(name) >= 4 {
		parent += "/" + name[:2]
	}
	return filepath.Join(dir, filepath.FromSlash(parent), name)
}

// only fails unless rep lists exactly one problem, of kind about object,
// with a detail holding each of details.
func only(t *testing.T, rep check.Report, kind check.Kind, object string, details ...string) check.Problem {
	t.Helper()
	if len(rep.Problems) != 1 || rep.Truncated != 0 {
		t.Fatalf("problems %+v (and %d more), want one %s of %s", rep.Problems, rep.Truncated, kind, object)
	}
	p := rep.Problems[0]
	if p.Kind != kind || p.Object != object || p.Path != "" {
		t.Fatalf("problem %+v, want %s of %s", p, kind, object)
	}
	for _, d := range details {
		if !strings.Contains(p.Detail, d) {
			t.Fatalf("detail %q lacks %q", p.Detail, d)
		}
	}
	return p
}

// TestCheckClean: a store filled by real ingests checks clean, every
// object looked at once, records and chunks counted, progress reported
// to the end.
func TestCheckClean(t *testing.T) {
	for name, open := range checkStores {
		t.Run(name, func(t *testing.T) {
			store, dir := open(t)
			fx := fillForCheck(t, store, dir)
			var done, total int
			rep := fx.check(t, CheckOptions{Progress: func(d, tot int) { done, total = d, tot }})
			if !rep.Clean() || rep.Summary() != "clean" {
				t.Fatalf("problems in a clean store: %+v", rep.Problems)
			}
			if rep.Objects != checkObjects || rep.Records != 25 || rep.Chunks != 23 || rep.BytesRead == 0 {
				t.Fatalf("counted %d objects, %d records, %d chunks, %d bytes read; want %d, 25, 23, > 0",
					rep.Objects, rep.Records, rep.Chunks, rep.BytesRead, checkObjects)
			}
			if done != checkObjects || total != checkObjects {
				t.Fatalf("last progress %d of %d, want %d of %d", done, total, checkObjects, checkObjects)
			}
		})
	}
}

// TestCheckFindsDamage: each kind of loss or damage done to a filled
// store is reported, as exactly one problem naming the object and, for
// chunks, the records needing them.
func TestCheckFindsDamage(t *testing.T) {
	ctx := context.Background()
	for name, open := range checkStores {
		t.Run(name, func(t *testing.T) {
			cases := map[string]func(t *testing.T, fx *checkFixture){
				"loose chunk deleted": func(t *testing.T, fx *checkFixture) {
					key := chunkKey(fx.fk, fx.big[0])
					if err := fx.n.store.Delete(ctx, key); err != nil {
						t.Fatal(err)
					}
					rep := fx.check(t, CheckOptions{})
					only(t, rep, check.Missing, key, "2000 bytes", "needed by 2 records (log 11, 22)")
					if rep.Summary() != "1 missing" {
						t.Fatalf("summary %q", rep.Summary())
					}
				},
				"loose chunk truncated": func(t *testing.T, fx *checkFixture) {
					key := chunkKey(fx.fk, fx.big[2])
					putBytes(t, fx.n.store, key, make([]byte, 1499))
					only(t, fx.check(t, CheckOptions{}), check.Damaged, key, "size 1499, database says 1500", "needed by 1 record (log 22)")
				},
				"pack truncated": func(t *testing.T, fx *checkFixture) {
					key := fx.packOf(t, fx.small[0])
					data, err := getLimited(ctx, fx.n.store, key, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					putBytes(t, fx.n.store, key, data[:len(data)-1])
					only(t, fx.check(t, CheckOptions{}), check.Damaged, key,
						fmt.Sprintf("pack of size %d, database says at least %d", len(data)-1, len(data)), "does not parse",
						"needed by 10 records (log 1, 2, 3, ...)")
				},
				"pack footer overwritten": func(t *testing.T, fx *checkFixture) {
					key := fx.packOf(t, fx.small[0])
					data, err := getLimited(ctx, fx.n.store, key, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					copy(data[len(data)-4:], "junk")
					putBytes(t, fx.n.store, key, data)
					only(t, fx.check(t, CheckOptions{}), check.Damaged, key,
						fmt.Sprintf("pack of size %d does not parse", len(data)), "no footer", "needed by 10 records")
				},
				"pack overwritten by another": func(t *testing.T, fx *checkFixture) {
					// A well-formed pack, but not the one the rows describe.
					a, b := fx.packOf(t, fx.small[0]), fx.packOf(t, fx.small[10])
					data, err := getLimited(ctx, fx.n.store, b, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					putBytes(t, fx.n.store, a, data)
					only(t, fx.check(t, CheckOptions{}), check.Damaged, a,
						"10 of the 10 chunks", "no such chunk", "needed by 10 records")
				},
				"pack deleted": func(t *testing.T, fx *checkFixture) {
					key := fx.packOf(t, fx.small[10])
					if err := fx.n.store.Delete(ctx, key); err != nil {
						t.Fatal(err)
					}
					only(t, fx.check(t, CheckOptions{}), check.Missing, key, "10 chunks", "needed by 10 records (log 12, 13, 14, ...)")
				},
				"log object deleted": func(t *testing.T, fx *checkFixture) {
					key := logKey(fx.fk, 12)
					if err := fx.n.store.Delete(ctx, key); err != nil {
						t.Fatal(err)
					}
					only(t, fx.check(t, CheckOptions{}), check.Missing, key, "11 records (log 12 to 22)")
				},
				"first log object deleted": func(t *testing.T, fx *checkFixture) {
					key := logKey(fx.fk, 1)
					if err := fx.n.store.Delete(ctx, key); err != nil {
						t.Fatal(err)
					}
					only(t, fx.check(t, CheckOptions{}), check.Missing, key, "11 records (log 1 to 11)")
				},
				"log object lacks a record": func(t *testing.T, fx *checkFixture) {
					key := logKey(fx.fk, 23)
					rewriteLogObject(t, fx, key, func(recs []*protocol.SealedRecord) []*protocol.SealedRecord {
						return append(recs[:1], recs[2:]...)
					})
					only(t, fx.check(t, CheckOptions{}), check.Damaged, key, "lacks 1 record (log 24)")
				},
				"log object unparsable": func(t *testing.T, fx *checkFixture) {
					key := logKey(fx.fk, 23)
					putBytes(t, fx.n.store, key, []byte("not a log"))
					only(t, fx.check(t, CheckOptions{}), check.Damaged, key, "3 records from it (log 23 to 25)")
				},
				"log object of records the database lacks": func(t *testing.T, fx *checkFixture) {
					// What an append whose commit failed leaves.
					key := logKey(fx.fk, 26)
					rewriteLogObject(t, fx, logKey(fx.fk, 23), func(recs []*protocol.SealedRecord) []*protocol.SealedRecord {
						for i, r := range recs {
							r.Sequence = int64(26 + i)
						}
						return recs
					}, key)
					if rep := fx.check(t, CheckOptions{}); !rep.Clean() {
						t.Fatalf("a fresh log object of an append in progress: %+v", rep.Problems)
					}
					only(t, fx.check(t, fx.old(t, key)), check.Orphan, key, "3 records (log 26, 27, 28)")
				},
				"envelope deleted": func(t *testing.T, fx *checkFixture) {
					key := envelopeKey(fx.fk, 1)
					if err := fx.n.store.Delete(ctx, key); err != nil {
						t.Fatal(err)
					}
					only(t, fx.check(t, CheckOptions{}), check.Missing, key, "generation 1")
				},
				"envelope replaced": func(t *testing.T, fx *checkFixture) {
					key := envelopeKey(fx.fk, 1)
					putBytes(t, fx.n.store, key, bytes.ToUpper(fx.env))
					only(t, fx.check(t, CheckOptions{}), check.Damaged, key, "differs")
				},
				"meta deleted": func(t *testing.T, fx *checkFixture) {
					key := metaKey(fx.fk)
					if err := fx.n.store.Delete(ctx, key); err != nil {
						t.Fatal(err)
					}
					only(t, fx.check(t, CheckOptions{}), check.Missing, key)
				},
				"meta unparsable": func(t *testing.T, fx *checkFixture) {
					key := metaKey(fx.fk)
					putBytes(t, fx.n.store, key, []byte("{"))
					only(t, fx.check(t, CheckOptions{}), check.Damaged, key, "corrupt")
				},
				"meta and database disagree on retention": func(t *testing.T, fx *checkFixture) {
					if err := fx.n.db.SetReceiverRetention(ctx, folderID, db.ReceiverRetention{KeepLast: 3}); err != nil {
						t.Fatal(err)
					}
					only(t, fx.check(t, CheckOptions{}), check.Damaged, metaKey(fx.fk), "retention")
				},
				"chunk name a rebuild refuses": func(t *testing.T, fx *checkFixture) {
					key := "r/" + fx.fk + "/c/0123"
					putBytes(t, fx.n.store, key, []byte("x"))
					only(t, fx.check(t, CheckOptions{}), check.Damaged, key, "rebuild would refuse")
				},
				"object outside the layout": func(t *testing.T, fx *checkFixture) {
					key := "r/" + fx.fk + "/notes.txt"
					putBytes(t, fx.n.store, key, []byte("x"))
					if rep := fx.check(t, CheckOptions{}); !rep.Clean() {
						t.Fatalf("a fresh stray object: %+v", rep.Problems)
					}
					only(t, fx.check(t, fx.old(t, key)), check.Orphan, key, "outside the receiver's layout")
				},
				"stray chunk": func(t *testing.T, fx *checkFixture) {
					id := make([]byte, 32)
					_, _ = rand.Read(id)
					key := chunkKey(fx.fk, id)
					putBytes(t, fx.n.store, key, []byte("stray"))
					if rep := fx.check(t, CheckOptions{}); !rep.Clean() || rep.Objects != checkObjects+1 {
						t.Fatalf("a fresh stray chunk, within the grace period: %+v, %d objects", rep.Problems, rep.Objects)
					}
					only(t, fx.check(t, fx.old(t, key)), check.Orphan, key, "no row")
				},
			}
			for name, damage := range cases {
				t.Run(name, func(t *testing.T) {
					store, dir := open(t)
					damage(t, fillForCheck(t, store, dir))
				})
			}
		})
	}
}

// rewriteLogObject replaces the log object key with change applied to
// its records, under to instead when given.
func rewriteLogObject(t *testing.T, fx *checkFixture, key string, change func([]*protocol.SealedRecord) []*protocol.SealedRecord, to ...string) {
	t.Helper()
	data, err := getLimited(context.Background(), fx.n.store, key, maxLogSize)
	if err != nil {
		t.Fatal(err)
	}
	var idx protocol.SealedIndex
	if err := proto.Unmarshal(data, &idx); err != nil {
		t.Fatal(err)
	}
	idx.Records = change(idx.Records)
	out, err := proto.Marshal(&idx)
	if err != nil {
		t.Fatal(err)
	}
	if len(to) > 0 {
		key = to[0]
	}
	putBytes(t, fx.n.store, key, out)
}

// TestCheckLeftover: a temporary file a crashed write left in the
// folder's part of a local store is a Leftover once older than the grace
// period, not before; one of another folder is not this folder's.
func TestCheckLeftover(t *testing.T) {
	store, dir := checkStores["local"](t)
	// Wrapped as serve wraps it: the check finds the temporary files
	// under the layers.
	fx := fillForCheck(t, metered.New(store, metered.NewMeter()), dir)
	temp := "r/" + fx.fk + "/c/ab/.tmp-0123456789abcdef"
	other := "r/" + folderKey("other") + "/.tmp-0123456789abcdef"
	for _, p := range []string{temp, other} {
		path := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("half a chunk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if rep := fx.check(t, CheckOptions{}); !rep.Clean() || rep.Objects != checkObjects+1 {
		t.Fatalf("a fresh temporary file (a write in progress): %+v, %d objects", rep.Problems, rep.Objects)
	}
	ago := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{temp, other} {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(p)), ago, ago); err != nil {
			t.Fatal(err)
		}
	}
	only(t, fx.check(t, CheckOptions{}), check.Leftover, temp, "12 bytes")
	// A grace period longer than its age keeps it out.
	if rep := fx.check(t, CheckOptions{Grace: 3 * time.Hour}); !rep.Clean() {
		t.Fatalf("with a grace of 3h: %+v", rep.Problems)
	}
}

// TestCheckEnvelopes: after a password change, the superseded envelope
// left in the store is an orphan once old (it opens with the old
// password), and so is one of a generation the database lacks.
func TestCheckEnvelopes(t *testing.T) {
	ctx := context.Background()
	store, dir := checkStores["local"](t)
	fx := fillForCheck(t, store, dir)
	prev := sha256Sum(fx.env)
	if _, err := fx.n.r.Request(ctx, fx.p.id, &protocol.Request{Folder: folderID, Size: 100,
		Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_PUT, Envelope: []byte("rewrapped"), Previous: prev[:]}); err != nil {
		t.Fatal(err)
	}
	if rep := fx.check(t, CheckOptions{}); !rep.Clean() {
		t.Fatalf("after a password change: %+v", rep.Problems)
	}
	for gen, want := range map[int64]string{1: "superseded envelope of generation 1", 3: "generation 3 the database lacks (it holds 2)"} {
		key := envelopeKey(fx.fk, gen)
		putBytes(t, fx.n.store, key, fx.env)
		if rep := fx.check(t, CheckOptions{}); !rep.Clean() {
			t.Fatalf("a fresh envelope of generation %d: %+v", gen, rep.Problems)
		}
		only(t, fx.check(t, fx.old(t, key)), check.Orphan, key, want)
		if err := fx.n.store.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckRefuses: a folder this node does not hold, and a negative
// grace period, are errors, not reports.
func TestCheckRefuses(t *testing.T) {
	n := newNode(t, localStore(t))
	if _, err := n.r.Check(context.Background(), "nope", CheckOptions{}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("unknown folder: %v, want ErrNotHeld", err)
	}
	if _, err := n.r.Check(context.Background(), folderID, CheckOptions{Grace: -time.Second}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("negative grace: %v, want ErrInvalidPolicy", err)
	}
	// An empty folder checks clean: its meta object only.
	rep, err := n.r.Check(context.Background(), folderID, CheckOptions{})
	if err != nil || !rep.Clean() || rep.Objects != 1 || rep.Records != 0 {
		t.Fatalf("empty folder: %+v, %v", rep, err)
	}
}

// TestCheckRacesIngestAndPrune: checks run while a peer keeps appending
// new versions (new chunks, packed and loose) and prunes drop the old
// ones and collect their chunks at once (no grace): every check is
// clean, none sees a chunk, pack or log object missing because an
// append or a collection ran beside it.
func TestCheckRacesIngestAndPrune(t *testing.T) {
	ctx := context.Background()
	store, dir := checkStores["local"](t)
	fx := fillForCheck(t, store, dir)
	if err := fx.n.r.SetRetention(ctx, folderID, Policy{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	const batches = 15
	counter := uint64(25) // fillForCheck's records
	ingested := make(chan error, 1)
	go func() {
		for range batches {
			var recs []*protocol.SealedRecord
			for file := range 5 {
				counter++
				recs = append(recs, record(fx.p, counter, byte(file), fx.p.addChunk(100+file), fx.p.addChunk(1200+file)))
			}
			if err := fx.p.conn.SealedIndex(fx.p.ctx, &protocol.SealedIndex{Folder: folderID, Records: recs}); err != nil {
				ingested <- err
				return
			}
			deadline := time.Now().Add(waitTimeout)
			for fx.p.lastAck() != int64(counter) {
				if time.Now().After(deadline) {
					ingested <- errors.New("batch not acknowledged")
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
		ingested <- nil
	}()
	stop, pruned := make(chan struct{}), make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				pruned <- nil
				return
			default:
			}
			if _, err := fx.n.r.Prune(ctx, folderID, PruneOptions{}); err != nil {
				pruned <- err
				return
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-pruned; err != nil {
			t.Error(err)
		}
	}()
	checks := 0
	for ingesting := true; ingesting || checks < 3; checks++ {
		select {
		case err := <-ingested:
			if err != nil {
				t.Fatal(err)
			}
			ingesting = false
		default:
		}
		if rep := fx.check(t, CheckOptions{}); !rep.Clean() {
			t.Fatalf("check %d raced by ingest and prune: %+v", checks, rep.Problems)
		}
	}
	// The prunes did collect: only the newest version of each file is left.
	if st, err := fx.n.r.Status(ctx, folderID); err != nil || st.Records >= 25+5*batches {
		t.Fatalf("status %+v, %v: the prunes dropped nothing", st, err)
	}
	t.Logf("%d checks", checks)
}

// TestCheckLostBucket: a store that lost everything but its meta object
// says how many objects went, each named; problems past
// check.MaxProblems are counted, not listed.
func TestCheckLostBucket(t *testing.T) {
	ctx := context.Background()
	store, dir := checkStores["local"](t)
	fx := fillForCheck(t, store, dir)
	var keys []string
	if err := store.List(ctx, "r/", func(i blob.Info) error {
		if i.Key != metaKey(fx.fk) {
			keys = append(keys, i.Key)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := store.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	rep := fx.check(t, CheckOptions{})
	// Three loose chunks, two packs, the envelope, and the log: the
	// database does not know where one append's records end, so the
	// records of all three log objects are one problem.
	if rep.Summary() != "7 missing" || rep.Objects != 1 {
		t.Fatalf("summary %q after %d objects: %+v", rep.Summary(), rep.Objects, rep.Problems)
	}
	want := map[string]string{
		envelopeKey(fx.fk, 1):                         "generation 1",
		logKey(fx.fk, 1):                              "25 records (log 1 to 25)",
		chunkKey(fx.fk, fx.big[0]):                    "needed by 2 records (log 11, 22)",
		chunkKey(fx.fk, fx.big[1]):                    "needed by 1 record (log 11)",
		chunkKey(fx.fk, fx.big[2]):                    "needed by 1 record (log 22)",
		packKey(fx.fk, mustPack(t, fx, fx.small[0])):  "needed by 10 records (log 1, 2, 3, ...)",
		packKey(fx.fk, mustPack(t, fx, fx.small[10])): "needed by 10 records (log 12, 13, 14, ...)",
	}
	for _, p := range rep.Problems {
		if p.Kind != check.Missing || !strings.Contains(p.Detail, want[p.Object]) || want[p.Object] == "" {
			t.Fatalf("problem %+v", p)
		}
		delete(want, p.Object)
	}
	if len(want) != 0 {
		t.Fatalf("not reported: %v", want)
	}
}

// TestCheckTruncates: problems past check.MaxProblems are counted, not
// listed.
func TestCheckTruncates(t *testing.T) {
	store := mem.New()
	n := newNode(t, store)
	for i := range check.MaxProblems + 5 {
		putBytes(t, store, fmt.Sprintf("r/%s/x/stray-%04d", folderKey(folderID), i), []byte("x"))
	}
	rep, err := n.r.Check(context.Background(), folderID, CheckOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil || len(rep.Problems) != check.MaxProblems || rep.Truncated != 5 || rep.Objects != check.MaxProblems+6 {
		t.Fatalf("%d problems listed, %d more, %d objects (%v)", len(rep.Problems), rep.Truncated, rep.Objects, err)
	}
	if rep.Summary() != "1000 orphan (and 5 more)" {
		t.Fatalf("summary %q", rep.Summary())
	}
}

// mustPack returns the ID of the pack holding chunk id.
func mustPack(t *testing.T, fx *checkFixture, id []byte) []byte {
	t.Helper()
	loc, err := fx.n.db.SealedChunk(context.Background(), folderID, id)
	if err != nil || loc.Pack == nil {
		t.Fatalf("chunk %x: %+v, %v", id[:4], loc, err)
	}
	return loc.Pack
}

// TestCheckPages: a folder of more rows than a page of the database
// (checkPage) is merged right across the pages: clean as built, then
// exactly the chunk and log object taken away are missing.
func TestCheckPages(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	n := newNode(t, store)
	fk := folderKey(folderID)
	const count = 2*checkPage + 100
	origin := bytes.Repeat([]byte{7}, 32)
	var (
		recs   []db.SealedRecord
		chunks []db.SealedChunk
		ids    [][]byte
	)
	for i := range count {
		id := make([]byte, 32)
		_, _ = rand.Read(id)
		ids = append(ids, id)
		size := int64(1 + i%50)
		putBytes(t, store, chunkKey(fk, id), make([]byte, size))
		chunks = append(chunks, db.SealedChunk{ID: id, Size: size, StoredAt: time.Now()})
		fkey := bytes.Repeat([]byte{byte(i)}, 32)
		recs = append(recs, db.SealedRecord{Seq: int64(i + 1), Origin: origin, Counter: uint64(i + 1), FileKey: fkey,
			Sealed: []byte("s"), Chunks: id, StoredAt: time.Now()})
	}
	// Log objects of 700 records each, as appends write them.
	for start := 0; start < count; start += 700 {
		part := recs[start:min(start+700, count)]
		data, err := proto.Marshal(&protocol.SealedIndex{Folder: folderID, Records: toWire(part)})
		if err != nil {
			t.Fatal(err)
		}
		putBytes(t, store, logKey(fk, part[0].Seq), data)
	}
	if err := n.db.AppendSealed(ctx, folderID, recs, chunks); err != nil {
		t.Fatal(err)
	}
	rep, err := n.r.Check(ctx, folderID, CheckOptions{})
	if err != nil || !rep.Clean() || rep.Records != count || rep.Chunks != count || rep.Objects != count+4+1 {
		t.Fatalf("%d records, %d chunks, %d objects, %v: %+v", rep.Records, rep.Chunks, rep.Objects, err, rep.Problems)
	}
	gone := ids[checkPage+10] // on the second page, whatever their order
	if err := store.Delete(ctx, chunkKey(fk, gone)); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, logKey(fk, 1401)); err != nil {
		t.Fatal(err)
	}
	rep, err = n.r.Check(ctx, folderID, CheckOptions{})
	if err != nil || len(rep.Problems) != 2 {
		t.Fatalf("%+v, %v", rep.Problems, err)
	}
	for _, p := range rep.Problems {
		switch p.Object {
		case chunkKey(fk, gone):
			if want := fmt.Sprintf("needed by 1 record (log %d)", checkPage+11); !strings.Contains(p.Detail, want) {
				t.Fatalf("detail %q, want %q", p.Detail, want)
			}
		case logKey(fk, 1401):
			if !strings.Contains(p.Detail, "700 records (log 1401 to 2100)") {
				t.Fatalf("detail %q", p.Detail)
			}
		default:
			t.Fatalf("problem %+v", p)
		}
	}
}
