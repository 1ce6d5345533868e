package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/storage/db"
)

func openSet(t *testing.T) (*db.DB, *Set) {
	t.Helper()
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	if err := d.PutFolder(ctx, db.Folder{ID: "f", Path: "/f", Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	s, err := Load(ctx, d, "f")
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

var (
	devA = crypt.DeviceID{1}
	devB = crypt.DeviceID{2}
)

func TestSetNeedAndPersistence(t *testing.T) {
	ctx := context.Background()
	d, s := openSet(t)
	local := []Record{
		{Name: "same", Size: 1, Version: Vector{{10, 1}}, ModifiedBy: 10},
		{Name: "old", Size: 2, Version: Vector{{10, 1}}, ModifiedBy: 10},
		{Name: "mine", Size: 3, Version: Vector{{10, 2}}, ModifiedBy: 10},
		{Name: "ro", Size: 4, Version: Vector{{10, 1}}, Flags: FlagLocalOnly},
	}
	stored, err := s.UpdateLocal(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	if stored[3].Sequence != 4 || s.LocalSequence() != 4 {
		t.Fatalf("sequences: %+v", stored)
	}
	remote := []Record{
		{Name: "same", Size: 1, Version: Vector{{10, 1}}, Sequence: 1},
		{Name: "old", Size: 5, Version: Vector{{10, 1}, {20, 1}}, Sequence: 2, Blocks: []Block{{Size: 5, Hash: chunk.HashOf([]byte("hello"))}}},
		{Name: "mine", Size: 6, Version: Vector{{10, 1}}, Sequence: 3},
		{Name: "new/dir", Type: Dir, Version: Vector{{20, 1}}, Sequence: 4},
		{Name: "gone", Deleted: true, Version: Vector{{20, 2}}, Sequence: 5},
		{Name: "new", Type: Dir, Version: Vector{{20, 1}}, Sequence: 6},
	}
	if err := s.UpdateRemote(ctx, devA, remote); err != nil {
		t.Fatal(err)
	}
	need := s.Need()
	var names []string
	for _, r := range need {
		names = append(names, r.Name)
	}
	want := []string{"new", "new/dir", "old"}
	if len(names) != len(want) {
		t.Fatalf("need %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("need %v, want %v (dirs first, parents first)", names, want)
		}
	}
	if got := s.LocalSince(0); len(got) != 3 {
		t.Fatalf("LocalSince left in a local-only record: %d records", len(got))
	}
	if has := s.Has("old", remote[1].Version); len(has) != 1 || has[0] != devA {
		t.Fatalf("Has: %v", has)
	}
	if s.RemoteSequence(devA) != 6 {
		t.Fatalf("remote sequence %d", s.RemoteSequence(devA))
	}
	c := s.Counts()
	if c.NeedFiles != 1 || c.NeedDirectories != 2 || c.LocalFiles != 4 {
		t.Fatalf("counts %+v", c)
	}

	// A reload from the database gives the same answers.
	s2, err := Load(ctx, d, "f")
	if err != nil {
		t.Fatal(err)
	}
	if len(s2.Need()) != 3 || s2.LocalSequence() != 4 || s2.RemoteSequence(devA) != 6 {
		t.Fatalf("reloaded set differs: need %d seq %d", len(s2.Need()), s2.LocalSequence())
	}
	r, ok := s2.Global("old")
	if !ok || r.Size != 5 || len(r.Blocks) != 1 || r.Blocks[0].Hash != chunk.HashOf([]byte("hello")) {
		t.Fatalf("reloaded global: %+v", r)
	}

	if err := s2.DropRemote(ctx, devA); err != nil {
		t.Fatal(err)
	}
	if len(s2.Need()) != 0 {
		t.Fatal("need survived dropping the only peer")
	}
}

func TestDeletionsOrderedDeepestFirst(t *testing.T) {
	ctx := context.Background()
	_, s := openSet(t)
	base := Vector{{10, 1}}
	s.UpdateLocal(ctx, []Record{{Name: "a", Type: Dir, Version: base}, {Name: "a/b", Type: Dir, Version: base}, {Name: "a/b/c", Version: base}})
	up := base.Update(20, 0)
	s.UpdateRemote(ctx, devB, []Record{
		{Name: "a", Type: Dir, Deleted: true, Version: up, Sequence: 1},
		{Name: "a/b", Type: Dir, Deleted: true, Version: up, Sequence: 2},
		{Name: "a/b/c", Deleted: true, Version: up, Sequence: 3},
	})
	need := s.Need()
	if len(need) != 3 || need[0].Name != "a/b/c" || need[1].Name != "a/b" || need[2].Name != "a" {
		t.Fatalf("deletion order: %+v", need)
	}
}

func TestEachLocalUnder(t *testing.T) {
	ctx := context.Background()
	_, s := openSet(t)
	v := Vector{{1, 1}}
	s.UpdateLocal(ctx, []Record{
		{Name: "a", Type: Dir, Version: v}, {Name: "a/z", Version: v}, {Name: "a/b", Version: v},
		{Name: "ab", Version: v}, {Name: "a/gone", Version: v, Deleted: true}, {Name: "b/x", Version: v},
	})
	var got []string
	if err := s.EachLocalUnder("a", func(r Record) error { got = append(got, r.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "a/b" || got[1] != "a/z" {
		t.Fatalf("under a: %v (want a/b, a/z: sorted, no sibling prefix, no deleted)", got)
	}
	got = nil
	s.EachLocal(func(r Record) error { got = append(got, r.Name); return nil })
	if len(got) != 5 || got[0] != "a" || got[4] != "b/x" {
		t.Fatalf("all: %v", got)
	}
}

func TestCompletion(t *testing.T) {
	ctx := context.Background()
	_, s := openSet(t)
	v := Vector{{1, 1}}
	s.UpdateLocal(ctx, []Record{{Name: "x", Size: 300, Version: v}, {Name: "y", Size: 100, Version: v}})
	if got := s.Completion(devA); got != 0 {
		t.Fatalf("peer with nothing: %v%%", got)
	}
	s.UpdateRemote(ctx, devA, []Record{{Name: "x", Size: 300, Version: v, Sequence: 1}})
	if got := s.Completion(devA); got != 75 {
		t.Fatalf("peer with x: %v%%, want 75", got)
	}
	// A name only a peer has counts once in the global totals.
	s.UpdateRemote(ctx, devB, []Record{{Name: "z", Size: 600, Version: Vector{{2, 1}}, Sequence: 1}})
	if c := s.Counts(); c.GlobalFiles != 3 || c.GlobalBytes != 1000 || c.NeedFiles != 1 || c.NeedBytes != 600 {
		t.Fatalf("counts %+v", c)
	}
	if got := s.Completion(devB); got != 60 {
		t.Fatalf("peer with z only: %v%%, want 60", got)
	}
}

func TestRenumberSurvivesReload(t *testing.T) {
	ctx := context.Background()
	d, s := openSet(t)
	for _, name := range []string{"a", "b"} {
		if _, err := s.UpdateLocal(ctx, []Record{{Name: name, Version: Vector{{10, 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Renumber(ctx, 100); err != nil {
		t.Fatal(err)
	}
	check := func(s *Set) {
		t.Helper()
		a, _ := s.Local("a")
		b, _ := s.Local("b")
		if a.Sequence != 101 || b.Sequence != 102 || s.LocalSequence() != 102 {
			t.Fatalf("after renumbering: a=%d b=%d local=%d, want 101 102 102", a.Sequence, b.Sequence, s.LocalSequence())
		}
		if got := s.LocalSince(100); len(got) != 2 || got[0].Name != "a" {
			t.Fatalf("LocalSince(100) = %+v", got)
		}
	}
	check(s)
	re, err := Load(ctx, d, "f")
	if err != nil {
		t.Fatal(err)
	}
	check(re)
	// Renumbering below the current sequence still moves past it.
	if err := re.Renumber(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if a, _ := re.Local("a"); a.Sequence != 103 {
		t.Fatalf("a = %d, want 103", a.Sequence)
	}
}

func TestRemote(t *testing.T) {
	ctx := context.Background()
	_, s := openSet(t)
	if _, ok := s.Remote(devA, "x"); ok {
		t.Fatal("record of an unknown device")
	}
	if err := s.UpdateRemote(ctx, devA, []Record{{Name: "x", Size: 3, Version: Vector{{20, 1}}, Sequence: 9}}); err != nil {
		t.Fatal(err)
	}
	if r, ok := s.Remote(devA, "x"); !ok || r.Size != 3 || r.Sequence != 9 {
		t.Fatalf("Remote = %+v, %v", r, ok)
	}
	if _, ok := s.Remote(devB, "x"); ok {
		t.Fatal("record of another device")
	}
}

// TestEachAnnounced: every local record peers are told of, deleted ones
// too, and the highest sequence; a local-only record makes the set unable
// to say what peers hold.
func TestEachAnnounced(t *testing.T) {
	ctx := context.Background()
	_, s := openSet(t)
	v := Vector{{1, 1}}
	for _, r := range []Record{{Name: "a", Version: v}, {Name: "b", Version: v, Deleted: true}, {Name: "c", Version: v}} {
		if _, err := s.UpdateLocal(ctx, []Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateLocal(ctx, []Record{{Name: "a", Version: Vector{{1, 2}}}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	seq, ok := s.EachAnnounced(func(r *Record) { got[r.Name] = r.Sequence })
	if !ok || seq != 4 || len(got) != 3 || got["a"] != 4 || got["b"] != 2 || got["c"] != 3 {
		t.Fatalf("EachAnnounced: seq %d ok %v records %v", seq, ok, got)
	}
	if _, err := s.UpdateLocal(ctx, []Record{{Name: "c", Version: Vector{{1, 3}}, Flags: FlagLocalOnly}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.EachAnnounced(func(*Record) {}); ok {
		t.Fatal("EachAnnounced is ok with a local-only record")
	}
}

// TestUpdateLocalShuffles: sequences do not follow the order records are
// given in (a receiver sees them as counters), except where a name comes
// twice and the later record must win.
func TestUpdateLocalShuffles(t *testing.T) {
	ctx := context.Background()
	_, s := openSet(t)
	v := Vector{{1, 1}}
	recs := make([]Record, 200)
	for i := range recs {
		recs[i] = Record{Name: fmt.Sprintf("d/%03d", i), Version: v}
	}
	if _, err := s.UpdateLocal(ctx, recs); err != nil {
		t.Fatal(err)
	}
	inOrder := true
	for i := 1; i < len(recs); i++ {
		a, _ := s.Local(recs[i-1].Name)
		b, _ := s.Local(recs[i].Name)
		inOrder = inOrder && a.Sequence < b.Sequence
	}
	if inOrder {
		t.Fatal("sequences follow the order the records came in")
	}
	if got := s.LocalSequence(); got != 200 {
		t.Fatalf("local sequence %d, want 200", got)
	}
	if _, err := s.UpdateLocal(ctx, []Record{{Name: "x", Version: v, Size: 1}, {Name: "x", Version: Vector{{1, 2}}, Size: 2}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Local("x"); r.Size != 2 {
		t.Fatalf("the earlier of two records of one name won: %+v", r)
	}
}

// The orderings kept beside the map (by name, by sequence) answer as a
// walk of every local record would, through updates of new and known
// names, local-only records, deletions, a renumbering and a reload.
func TestLocalOrderingsMatchAWalk(t *testing.T) {
	ctx := context.Background()
	d, s := openSet(t)
	rng := rand.New(rand.NewPCG(1, 2))
	v := Vector{{1, 1}}
	check := func(s *Set, when string) {
		t.Helper()
		s.mu.RLock()
		all := make([]Record, 0, len(s.local))
		for _, r := range s.local {
			all = append(all, *r)
		}
		s.mu.RUnlock()
		for _, since := range []int64{0, 1, s.LocalSequence() / 2, s.LocalSequence() - 3, s.LocalSequence()} {
			var want []Record
			for _, r := range all {
				if r.Sequence > since && r.Flags&FlagLocalOnly == 0 {
					want = append(want, r)
				}
			}
			sort.Slice(want, func(i, j int) bool { return want[i].Sequence < want[j].Sequence })
			got := s.LocalSince(since)
			if len(got) != len(want) {
				t.Fatalf("%s: LocalSince(%d) gave %d records, a walk %d", when, since, len(got), len(want))
			}
			for i := range got {
				if got[i].Name != want[i].Name || got[i].Sequence != want[i].Sequence {
					t.Fatalf("%s: LocalSince(%d)[%d] = %s@%d, want %s@%d", when, since, i, got[i].Name, got[i].Sequence, want[i].Name, want[i].Sequence)
				}
			}
		}
		for _, dir := range []string{"d1", "d1/s", "d2", "d10"} {
			var want []string
			for _, r := range all {
				if !r.Deleted && strings.HasPrefix(r.Name, dir+"/") {
					want = append(want, r.Name)
				}
			}
			sort.Strings(want)
			var got []string
			s.EachLocalUnder(dir, func(r Record) error { got = append(got, r.Name); return nil })
			if !slices.Equal(got, want) {
				t.Fatalf("%s: under %s: %v, a walk %v", when, dir, got, want)
			}
		}
	}
	for round := range 40 {
		batch := make([]Record, 0, 20)
		for range 1 + rng.IntN(20) {
			name := fmt.Sprintf("d%d/f%d", rng.IntN(12), rng.IntN(30))
			if rng.IntN(4) == 0 {
				name = fmt.Sprintf("d%d/s/f%d", rng.IntN(12), rng.IntN(10))
			}
			r := Record{Name: name, Version: v, Deleted: rng.IntN(5) == 0}
			if rng.IntN(8) == 0 {
				r.Flags = FlagLocalOnly
			}
			batch = append(batch, r)
		}
		if _, err := s.UpdateLocal(ctx, batch); err != nil {
			t.Fatal(err)
		}
		check(s, fmt.Sprintf("round %d", round))
		if round == 20 {
			if err := s.Renumber(ctx, s.LocalSequence()+100); err != nil {
				t.Fatal(err)
			}
			check(s, "after the renumbering")
		}
	}
	s2, err := Load(ctx, d, "f")
	if err != nil {
		t.Fatal(err)
	}
	check(s2, "after a reload")
}

// BenchmarkLocalSince is the announcement of the last 100 changes of a
// folder of 100,000 files: what a node pulling many files does after each
// batch.
func BenchmarkLocalSince(b *testing.B) {
	ctx := context.Background()
	d, err := db.Open(filepath.Join(b.TempDir(), "l.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	if err := d.PutFolder(ctx, db.Folder{ID: "f", Path: "/f", Type: db.SendReceive}); err != nil {
		b.Fatal(err)
	}
	s, err := Load(ctx, d, "f")
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]Record, 1000)
	for i := range 100 {
		for j := range recs {
			recs[j] = Record{Name: fmt.Sprintf("d%03d/f%06d", j%100, i*1000+j), Version: Vector{{1, 1}}}
		}
		if _, err := s.UpdateLocal(ctx, recs); err != nil {
			b.Fatal(err)
		}
	}
	since := s.LocalSequence() - 100
	b.ResetTimer()
	for range b.N {
		if n := len(s.LocalSince(since)); n != 100 {
			b.Fatalf("%d records", n)
		}
	}
}

// TestRemoteSharesLocal: a peer's record of a file in sync with ours
// keeps one copy of the name, version and blocks, ours; what differs
// stays the peer's own, and a later local change leaves it as it was.
func TestRemoteSharesLocal(t *testing.T) {
	ctx := context.Background()
	_, s := openSet(t)
	block := func(b byte) Block { return Block{Size: 1, Hash: chunk.HashOf([]byte{b})} }
	mine := []Record{
		{Name: "same", Type: File, Size: 1, Version: Vector{{20, 1}}, Blocks: []Block{block(1)}},
		{Name: "newer", Type: File, Size: 1, Version: Vector{{20, 1}}, Blocks: []Block{block(2)}},
	}
	if _, err := s.UpdateLocal(ctx, mine); err != nil {
		t.Fatal(err)
	}
	// The peer's records as decoded from the wire: copies of their own.
	theirs := []Record{
		{Name: strings.Clone("same"), Type: File, Size: 1, Version: Vector{{20, 1}}, Blocks: []Block{block(1)}, Sequence: 4},
		{Name: strings.Clone("newer"), Type: File, Size: 1, Version: Vector{{20, 1}, {30, 1}}, Blocks: []Block{block(3)}, Sequence: 5},
	}
	if err := s.UpdateRemote(ctx, devA, theirs); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	same, l := s.remote[devA]["same"], s.local["same"]
	newer, ln := s.remote[devA]["newer"], s.local["newer"]
	s.mu.RUnlock()
	if unsafe.StringData(same.Name) != unsafe.StringData(l.Name) || &same.Version[0] != &l.Version[0] || &same.Blocks[0] != &l.Blocks[0] {
		t.Error("a peer's record equal to ours keeps copies of its own")
	}
	if same.Sequence != 4 {
		t.Errorf("shared record's sequence %d, want the peer's 4", same.Sequence)
	}
	if &newer.Version[0] == &ln.Version[0] || &newer.Blocks[0] == &ln.Blocks[0] || newer.Blocks[0] != block(3) || len(newer.Version) != 2 {
		t.Errorf("a newer record took what differs from ours: %+v", newer)
	}
	// Our next version of "same" leaves the peer's record alone.
	next := *l
	next.Version = l.Version.Update(crypt.ShortID(20), 2)
	next.Blocks = []Block{block(9)}
	if _, err := s.UpdateLocal(ctx, []Record{next}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Remote(devA, "same"); r.Version.Compare(Vector{{20, 1}}) != Equal || r.Blocks[0] != block(1) {
		t.Errorf("the peer's record changed with ours: %+v", r)
	}
}

// TestLoadSharesLocal: records loaded from the database share what equals
// between a peer's record and ours, as records taken in do.
func TestLoadSharesLocal(t *testing.T) {
	ctx := context.Background()
	d, s := openSet(t)
	r := Record{Name: "x", Type: File, Size: 1, Version: Vector{{20, 1}}, Blocks: []Block{{Size: 1, Hash: chunk.HashOf([]byte{1})}}}
	if _, err := s.UpdateLocal(ctx, []Record{r}); err != nil {
		t.Fatal(err)
	}
	r.Sequence = 7
	if err := s.UpdateRemote(ctx, devA, []Record{r}); err != nil {
		t.Fatal(err)
	}
	re, err := Load(ctx, d, "f")
	if err != nil {
		t.Fatal(err)
	}
	re.mu.RLock()
	defer re.mu.RUnlock()
	theirs, mine := re.remote[devA]["x"], re.local["x"]
	if unsafe.StringData(theirs.Name) != unsafe.StringData(mine.Name) || &theirs.Version[0] != &mine.Version[0] || &theirs.Blocks[0] != &mine.Blocks[0] || theirs.Sequence != 7 {
		t.Errorf("loaded: the peer's record %+v keeps copies of its own", theirs)
	}
}
