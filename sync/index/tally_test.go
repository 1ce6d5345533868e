package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"lockstep/crypt"
)

// bruteCounts, bruteNeed and bruteCompletion compute from all records
// what the Set keeps current as records change.
func bruteCounts(s *Set) Counts {
	var c Counts
	for _, r := range s.local {
		if !r.Deleted {
			if r.Type == Dir {
				c.LocalDirectories++
			} else {
				c.LocalFiles++
			}
			c.LocalBytes += r.Size
		}
	}
	s.eachName(func(name string, g *Record) {
		if g == nil {
			return
		}
		if !g.Deleted {
			if g.Type == Dir {
				c.GlobalDirectories++
			} else {
				c.GlobalFiles++
			}
			c.GlobalBytes += g.Size
		}
		if needs(s.local[name], g) {
			if g.Type == Dir {
				c.NeedDirectories++
			} else {
				c.NeedFiles++
			}
			if !g.Deleted {
				c.NeedBytes += g.Size
			}
		}
	})
	return c
}

func bruteNeed(s *Set) []string {
	var out []string
	s.eachName(func(name string, g *Record) {
		if needs(s.local[name], g) {
			out = append(out, name)
		}
	})
	slices.Sort(out)
	return out
}

func bruteCompletion(s *Set, dev crypt.DeviceID) float64 {
	m := s.remote[dev]
	var total, have, files, haveFiles int64
	s.eachName(func(name string, g *Record) {
		if g == nil || g.Deleted {
			return
		}
		files++
		total += g.Size
		if r, ok := m[name]; ok && r.Version.Compare(g.Version) == Equal {
			haveFiles++
			have += g.Size
		}
	})
	switch {
	case total > 0:
		return 100 * float64(have) / float64(total)
	case files > 0:
		return 100 * float64(haveFiles) / float64(files)
	}
	return 100
}

// TestSetTallies makes random changes (local and remote records, new
// versions, concurrent ones, deletions, empty files, local-only records,
// a peer dropped, a renumbering, a reload) and checks after each that
// Counts, Need and Completion equal what all records give.
func TestSetTallies(t *testing.T) {
	ctx := context.Background()
	d, s := openSet(t)
	rng := rand.New(rand.NewPCG(1, 2))
	devs := []crypt.DeviceID{devA, devB, {3}}
	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("d%d/f%d", i%4, i)
	}
	counter := map[string]uint64{}
	record := func(by crypt.DeviceID) Record {
		name := names[rng.IntN(len(names))]
		counter[name]++
		r := Record{Name: name, Size: int64(rng.IntN(3) * 100), Version: Vector{{by.Short(), counter[name]}}, ModifiedBy: by.Short()}
		switch rng.IntN(8) {
		case 0:
			r.Deleted, r.Size = true, 0
		case 1:
			// A concurrent change: another device's counter.
			r.Version = Vector{{crypt.DeviceID{9}.Short(), counter[name]}}
		case 2:
			r.Type = Dir
		}
		return r
	}
	check := func(step int) {
		t.Helper()
		if got, want := s.Counts(), bruteCounts(s); got != want {
			t.Fatalf("step %d: counts %+v, want %+v", step, got, want)
		}
		var need []string
		for _, r := range s.Need() {
			need = append(need, r.Name)
		}
		slices.Sort(need)
		if want := bruteNeed(s); !slices.Equal(need, want) {
			t.Fatalf("step %d: need %v, want %v", step, need, want)
		}
		for _, dev := range devs {
			if got, want := s.Completion(dev), bruteCompletion(s, dev); got != want {
				t.Fatalf("step %d: completion of %v %v, want %v", step, dev.Short(), got, want)
			}
		}
	}

	for step := range 600 {
		switch op := rng.IntN(20); {
		case op < 8:
			recs := []Record{record(crypt.DeviceID{10})}
			if op == 0 {
				recs[0].Flags = FlagLocalOnly
			}
			if op == 1 {
				recs = append(recs, recs[0]) // one name twice in a batch
			}
			if _, err := s.UpdateLocal(ctx, recs); err != nil {
				t.Fatal(err)
			}
		case op < 18:
			dev := devs[rng.IntN(len(devs))]
			recs := []Record{record(dev), record(dev)}
			if op == 10 {
				// The peer has exactly what is local.
				if l, ok := s.Local(recs[0].Name); ok {
					recs[0] = l
				}
			}
			if err := s.UpdateRemote(ctx, dev, recs); err != nil {
				t.Fatal(err)
			}
		case op == 18:
			if err := s.DropRemote(ctx, devs[rng.IntN(len(devs))]); err != nil {
				t.Fatal(err)
			}
		default:
			if err := s.Renumber(ctx, int64(step)); err != nil {
				t.Fatal(err)
			}
		}
		check(step)
	}
	re, err := Load(ctx, d, "f")
	if err != nil {
		t.Fatal(err)
	}
	s = re
	check(-1)
}

// TestGlobalDeterministic: with records that beat each other in a circle
// (A dominates B, B wins its conflict with C, C wins its conflict with A),
// the global record is the same every time it is asked for.
func TestGlobalDeterministic(t *testing.T) {
	ctx := context.Background()
	_, s := openSet(t)
	x, y := crypt.DeviceID{20}.Short(), crypt.DeviceID{21}.Short()
	a := Record{Name: "n", Size: 1, Version: Vector{{x, 2}}, ModifiedBy: x}
	b := Record{Name: "n", Size: 2, Version: Vector{{x, 1}}, ModifiedBy: x, ModTime: 2}
	c := Record{Name: "n", Size: 3, Version: Vector{{y, 1}}, ModifiedBy: y, ModTime: 1}
	if !a.Wins(&b) || !b.Wins(&c) || !c.Wins(&a) {
		t.Fatal("the records do not beat each other in a circle")
	}
	for i, r := range []Record{a, b, c} {
		if err := s.UpdateRemote(ctx, crypt.DeviceID{byte(1 + i)}, []Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	first, _ := s.Global("n")
	for range 100 {
		if g, _ := s.Global("n"); g.Size != first.Size {
			t.Fatalf("global is the record of size %d, then %d", first.Size, g.Size)
		}
	}
}

// TestCountsDirectories: directories are counted apart from files, so a
// folder of three files in one directory has three files, not four, and
// a peer's new directory is needed as a directory.
func TestCountsDirectories(t *testing.T) {
	ctx := context.Background()
	_, s := openSet(t)
	v := Vector{{devA.Short(), 1}}
	if _, err := s.UpdateLocal(ctx, []Record{
		{Name: "d", Type: Dir, Version: v},
		{Name: "d/a", Size: 10, Version: v},
		{Name: "d/b", Size: 20, Version: v},
		{Name: "c", Size: 30, Version: v},
	}); err != nil {
		t.Fatal(err)
	}
	w := Vector{{devB.Short(), 1}}
	if err := s.UpdateRemote(ctx, devB, []Record{{Name: "e", Type: Dir, Version: w}, {Name: "e/f", Size: 5, Version: w}}); err != nil {
		t.Fatal(err)
	}
	want := Counts{
		LocalFiles: 3, LocalDirectories: 1, LocalBytes: 60,
		GlobalFiles: 4, GlobalDirectories: 2, GlobalBytes: 65,
		NeedFiles: 1, NeedDirectories: 1, NeedBytes: 5,
	}
	if got := s.Counts(); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
}
