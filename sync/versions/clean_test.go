package versions

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// cleanAt archives one version of name per age (before now) and cleans at
// now; it returns the ages of the versions removed.
func cleanAt(t *testing.T, p Policy, name string, ages []time.Duration) []time.Duration {
	t.Helper()
	f := newFolder(t, p)
	now := t0.Add(400 * day)
	for i, age := range ages {
		f.saveAt(name, fmt.Sprint(i), now.Add(-age))
	}
	removed, err := f.a.Clean(now)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Duration
	for _, v := range removed {
		out = append(out, now.Sub(v.Time))
		if f.exists(Dir + "/" + v.ID) {
			t.Errorf("Clean returned %s but it is still there", v.ID)
		}
	}
	kept := f.list("")
	if len(kept)+len(removed) != len(ages) {
		t.Fatalf("kept %d + removed %d != %d saved", len(kept), len(removed), len(ages))
	}
	// Clean is idempotent.
	again, err := f.a.Clean(now)
	if err != nil || len(again) != 0 {
		t.Fatalf("a second Clean removed %q (%v)", ids(again), err)
	}
	slices.Sort(out)
	return out
}

func TestCleanTrashcan(t *testing.T) {
	const s = time.Second
	cases := []struct {
		days int
		ages []time.Duration
		want []time.Duration
	}{
		{2, []time.Duration{2*day - s, 2 * day, 2*day + s}, []time.Duration{2*day + s}},
		{2, []time.Duration{s, day}, nil},
		{1, []time.Duration{2 * day, 3 * day}, []time.Duration{2 * day, 3 * day}},
		{0, []time.Duration{s, 399 * day}, nil}, // forever
	}
	for _, c := range cases {
		got := cleanAt(t, Policy{Type: Trashcan, Days: c.days}, "f.txt", c.ages)
		if !slices.Equal(got, c.want) {
			t.Errorf("trashcan %d days, ages %v: removed %v, want %v", c.days, c.ages, got, c.want)
		}
	}
}

func TestCleanSimple(t *testing.T) {
	const keep = 3
	for n := keep - 1; n <= keep+1; n++ {
		var ages []time.Duration
		for i := range n {
			ages = append(ages, time.Duration(i+1)*time.Minute)
		}
		got := cleanAt(t, Policy{Type: Simple, Keep: keep}, "a/f", ages)
		var want []time.Duration
		if n > keep {
			want = ages[keep:] // the oldest
		}
		if !slices.Equal(got, want) {
			t.Errorf("simple keep %d with %d versions: removed %v, want %v", keep, n, got, want)
		}
	}

	// Files are counted separately; versions in the same second are ordered
	// by their counter.
	f := newFolder(t, Policy{Type: Simple, Keep: 2})
	for i := range 3 {
		f.saveAt("x", fmt.Sprint(i), t0)
		f.saveAt("y", fmt.Sprint(i), t0.Add(time.Duration(i)*time.Hour))
	}
	removed, err := f.a.Clean(t0.Add(day))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(removed); !slices.Equal(got, []string{"x~20260102-030405", "y~20260102-030405"}) {
		t.Fatalf("removed %q", got)
	}
}

func TestCleanStaggeredSteps(t *testing.T) {
	const s = time.Second
	// Two versions: the older at age old, the newer d later. The newer one
	// goes if d is less than the step of the interval it falls in.
	intervals := []struct {
		old, step time.Duration
	}{
		{10 * time.Minute, 30 * s},
		{10 * time.Hour, time.Hour},
		{20 * day, day},
		{200 * day, 7 * day},
	}
	for _, iv := range intervals {
		for _, d := range []time.Duration{iv.step - s, iv.step, iv.step + s} {
			got := cleanAt(t, Policy{Type: Staggered, Days: 365}, "f", []time.Duration{iv.old, iv.old - d})
			var want []time.Duration
			if d < iv.step {
				want = []time.Duration{iv.old - d}
			}
			if !slices.Equal(got, want) {
				t.Errorf("step %v, versions %v apart: removed %v, want %v", iv.step, d, got, want)
			}
		}
	}
	// Maximum age, with one version per file so that thinning plays no part.
	for _, days := range []int{365, 10} {
		f := newFolder(t, Policy{Type: Staggered, Days: days})
		now := t0.Add(400 * day)
		max := time.Duration(days) * day
		for i, age := range []time.Duration{max - s, max, max + s} {
			f.saveAt(fmt.Sprintf("f%d", i), "x", now.Add(-age))
		}
		removed, err := f.a.Clean(now)
		if err != nil {
			t.Fatal(err)
		}
		if len(removed) != 1 || removed[0].Path != "f2" {
			t.Errorf("max age %d days: removed %+v, want only f2", days, removed)
		}
	}
}

// TestCleanStaggeredClock saves a version every 10 s for two hours and
// cleans at the last one: the oldest (age 2 h) stays, then one an hour
// later (age 1 h, the first whose age is not beyond the step), then one
// per 30 s through the first hour.
func TestCleanStaggeredClock(t *testing.T) {
	f := newFolder(t, Policy{Type: Staggered, Days: 365})
	const n = 721 // ages 7200 s down to 0 s
	start := t0
	for i := range n {
		f.saveAt("doc.txt", fmt.Sprint(i), start.Add(time.Duration(i)*10*time.Second))
	}
	now := start.Add((n - 1) * 10 * time.Second)
	removed, err := f.a.Clean(now)
	if err != nil {
		t.Fatal(err)
	}
	var keptAges []int
	for _, v := range f.list("doc.txt") {
		keptAges = append(keptAges, int(now.Sub(v.Time)/time.Second))
	}
	var want []int
	for age := 0; age <= 3570; age += 30 {
		want = append(want, age)
	}
	want = append(want, 3600, 7200)
	if !slices.Equal(keptAges, want) {
		t.Fatalf("kept ages %v,\nwant %v", keptAges, want)
	}
	if len(removed) != n-len(want) {
		t.Fatalf("removed %d, want %d", len(removed), n-len(want))
	}
}

func TestCleanRemovesEmptyDirs(t *testing.T) {
	f := newFolder(t, Policy{Type: Trashcan, Days: 1})
	f.saveAt("a/b/c/gone.txt", "x", t0)
	f.saveAt("a/kept.txt", "x", t0.Add(2*day))
	f.write(Dir+"/d/foreign", "x")
	if err := os.MkdirAll(filepath.Join(f.dir, Dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := f.a.Clean(t0.Add(2*day + time.Hour))
	if err != nil || len(removed) != 1 || removed[0].Path != "a/b/c/gone.txt" {
		t.Fatalf("Clean = %+v, %v", removed, err)
	}
	for name, want := range map[string]bool{
		Dir + "/a/b":                        false,
		Dir + "/a/kept~20260104-030405.txt": true,
		Dir + "/d/foreign":                  true,
		Dir + "/empty":                      true, // not left by Clean
		Dir:                                 true,
	} {
		if f.exists(name) != want {
			t.Errorf("%s exists = %v, want %v", name, !want, want)
		}
	}

	// The archive directory itself stays even when Clean empties it.
	g := newFolder(t, Policy{Type: Trashcan, Days: 1})
	g.saveAt("f", "x", t0)
	if _, err := g.a.Clean(t0.Add(3 * day)); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(filepath.Join(g.dir, Dir)); err != nil || len(entries) != 0 {
		t.Fatalf("archive: %v, %v; want an empty directory", entries, err)
	}
}
