package restore

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/sealed"
)

// uploads seals records of one origin as backup does: each pass ends with
// a record carrying the checkpoint of the origin's index after it.
type uploads struct {
	t      *testing.T
	keys   *crypt.Keys
	origin crypt.DeviceID
	index  map[string]index.Record // the origin's index: newest record per name
	log    []*protocol.SealedRecord
	seq    int64
}

func newUploads(t *testing.T, origin byte) *uploads {
	keys, _ := folderSecrets()
	return &uploads{t: t, keys: keys, origin: crypt.DeviceID{origin}, index: map[string]index.Record{}}
}

// pass records changes (name → deleted) in order and seals them, the
// last one with the checkpoint.
func (u *uploads) pass(names []string, deleted bool) {
	u.t.Helper()
	var recs []index.Record
	for _, n := range names {
		u.seq++
		r := index.Record{Name: n, Type: index.File, Sequence: u.seq, Deleted: deleted, ModTime: 1, Mode: 0o644,
			Version: index.Vector{{ID: 1, Value: uint64(u.seq)}}}
		u.index[n] = r
		recs = append(recs, r)
	}
	d := sealed.NewDigest(u.keys)
	for _, r := range u.index {
		if !r.Deleted {
			d.Add(u.keys.FileKey(r.Name), uint64(r.Sequence))
		}
	}
	cp := d.Checkpoint(uint64(u.seq), time.Unix(int64(1000+u.seq), 0))
	for i := range recs {
		var c *sealed.Checkpoint
		if i == len(recs)-1 {
			c = &cp
		}
		sr, err := sealed.SealWith(u.keys, testFolder, u.origin, &recs[i], 0, c)
		if err != nil {
			u.t.Fatal(err)
		}
		sr.Sequence = int64(len(u.log) + 1)
		u.log = append(u.log, sr)
	}
}

// collect runs the log, less the records drop says, through a collector.
func (u *uploads) collect(drop func(i int) bool) []Proof {
	c := newCollector(u.keys, testFolder, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i, sr := range u.log {
		if !drop(i) {
			c.add(sr)
		}
	}
	return c.prover.Proofs()
}

func TestProofs(t *testing.T) {
	u := newUploads(t, 1)
	u.pass([]string{"a", "b", "c", "d"}, false) // log 0-3, counters 1-4
	u.pass([]string{"b"}, false)                // log 4: b's newest
	u.pass([]string{"c"}, true)                 // log 5: c deleted
	keep := func(int) bool { return false }

	for _, tc := range []struct {
		name     string
		drop     func(i int) bool
		complete bool
		files    uint64 // found
		after    int
		asOf     int64
	}{
		{"everything", keep, true, 3, 0, 1006},
		{"a record from the middle", func(i int) bool { return i == 0 }, false, 2, 0, 1006},
		{"the newest version of b: an older one in its place", func(i int) bool { return i == 4 }, false, 3, 0, 1006},
		{"a superseded version of b", func(i int) bool { return i == 1 }, true, 3, 0, 1006},
		// The last pass withheld whole, checkpoint and all: what is left
		// is consistent, and only its time tells it is older.
		{"the last pass", func(i int) bool { return i == 5 }, true, 4, 0, 1005},
		// c's every version gone, as keep-deleted-days drops them: the
		// deletion carried the newest checkpoint, so the one before it
		// misses c. A pass of deletions only has nothing else to carry
		// its checkpoint (see docs/design.md).
		{"an expired deletion that carried the checkpoint", func(i int) bool { return i == 5 || i == 2 }, false, 3, 0, 1005},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := u.collect(tc.drop)
			if len(ps) != 1 {
				t.Fatalf("%d proofs, want 1", len(ps))
			}
			p := ps[0]
			if p.Complete != tc.complete || p.Found != tc.files || p.After != tc.after || p.AsOf.Unix() != tc.asOf {
				t.Errorf("proof %+v; want complete %v, found %d, after %d, as of %d", p, tc.complete, tc.files, tc.after, tc.asOf)
			}
		})
	}
}

// TestProofsUncovered: records after an origin's newest checkpoint (a pass
// cut short, or its checkpoint withheld) are counted, not proven.
func TestProofsUncovered(t *testing.T) {
	u := newUploads(t, 1)
	u.pass([]string{"a", "b"}, false)
	u.pass([]string{"c"}, false)
	ps := u.collect(func(i int) bool { return i == 2 }) // the second pass's record and checkpoint
	if len(ps) != 1 || !ps[0].Complete || ps[0].After != 0 || ps[0].Counter != 2 {
		t.Fatalf("proofs %+v", ps)
	}
	u.pass([]string{"d", "e"}, false)
	u.log = u.log[:len(u.log)-1] // the pass cut short: e and its checkpoint never stored
	ps = u.collect(func(int) bool { return false })
	if len(ps) != 1 || !ps[0].Complete || ps[0].After != 1 || ps[0].Counter != 3 {
		t.Fatalf("proofs %+v", ps)
	}
}

// TestNewestProof: the strict check applies to the checkpoint sealed
// last, whichever origin sealed it.
func TestNewestProof(t *testing.T) {
	ps := []Proof{{Origin: crypt.DeviceID{1}, AsOf: time.Unix(5, 0)}, {Origin: crypt.DeviceID{2}, AsOf: time.Unix(9, 0)}, {Origin: crypt.DeviceID{3}, AsOf: time.Unix(7, 0)}}
	if n := sealed.NewestProof(ps); n == nil || n.Origin != (crypt.DeviceID{2}) {
		t.Fatalf("newest %+v", n)
	}
	if sealed.NewestProof(nil) != nil {
		t.Fatal("a proof out of none")
	}
}
