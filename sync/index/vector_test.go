package index

import (
	"errors"
	"testing"
)

func TestVectorUpdateAndCompare(t *testing.T) {
	var v Vector
	a := v.Update(1, 0)
	if a.Counter(1) != 1 {
		t.Fatalf("first update: %v", a)
	}
	b := a.Update(2, 0)
	if got := b.Compare(a); got != Greater {
		t.Errorf("b vs a: %v, want greater", got)
	}
	if got := a.Compare(b); got != Lesser {
		t.Errorf("a vs b: %v, want lesser", got)
	}
	c := a.Update(3, 0)
	if got := b.Compare(c); got != Concurrent {
		t.Errorf("b vs c: %v, want concurrent", got)
	}
	if got := b.Compare(b); got != Equal {
		t.Errorf("b vs b: %v", got)
	}
	m := b.Merge(c)
	if m.Compare(b) != Greater || m.Compare(c) != Greater {
		t.Errorf("merge %v does not dominate %v and %v", m, b, c)
	}
	// Clock floor: a counter jumps to now when now is larger.
	if d := a.Update(1, 1000); d.Counter(1) != 1000 {
		t.Errorf("update with now=1000: %v", d)
	}
	if d := a.Update(1, 1000).Update(1, 1000); d.Counter(1) != 1001 {
		t.Errorf("second update in the same second: %v", d)
	}
	// Insertion keeps the vector sorted.
	e := Vector{{1, 1}, {5, 1}}.Update(3, 0)
	if len(e) != 3 || e[1].ID != 3 {
		t.Errorf("insert in the middle: %v", e)
	}
	if Vector(nil).Compare(nil) != Equal {
		t.Error("empty vectors differ")
	}
}

func TestVectorEncoding(t *testing.T) {
	v := Vector{{1, 5}, {1 << 60, 1 << 40}}
	b, _ := v.MarshalBinary()
	got, err := UnmarshalVector(b)
	if err != nil || got.Compare(v) != Equal || len(got) != 2 {
		t.Fatalf("round trip: %v %v", got, err)
	}
	bad := [][]byte{
		nil,
		{2},                               // count without entries
		append(append([]byte{}, b...), 0), // trailing byte
		{1, 0, 0, 0, 0, 0, 0, 0, 1, 0},    // zero counter
		{2, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1}, // unsorted
	}
	for i, in := range bad {
		if _, err := UnmarshalVector(in); !errors.Is(err, ErrVector) {
			t.Errorf("case %d: %v, want ErrVector", i, err)
		}
	}
}

func FuzzUnmarshalVector(f *testing.F) {
	b, _ := Vector{{1, 5}, {7, 9}}.MarshalBinary()
	f.Add(b)
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := UnmarshalVector(in)
		if err != nil {
			return
		}
		out, _ := v.MarshalBinary()
		if string(out) != string(in) {
			t.Fatalf("not canonical: %x -> %v -> %x", in, v, out)
		}
	})
}

func TestCanonical(t *testing.T) {
	v := Canonical(Vector{{5, 1}, {1, 0}, {3, 2}, {5, 4}})
	want := Vector{{3, 2}, {5, 4}}
	if v.Compare(want) != Equal || len(v) != 2 {
		t.Fatalf("got %v, want %v", v, want)
	}
}

func TestWinsIsTotal(t *testing.T) {
	base := Vector{{1, 1}}
	a := Record{Name: "f", Version: base.Update(1, 0), ModTime: 10, ModifiedBy: 1}
	b := Record{Name: "f", Version: base.Update(2, 0), ModTime: 20, ModifiedBy: 2}
	if !b.Wins(&a) || a.Wins(&b) {
		t.Error("later mtime should win a conflict")
	}
	b.ModTime = 10
	if !b.Wins(&a) || a.Wins(&b) {
		t.Error("larger device should win a tie")
	}
	del := Record{Name: "f", Version: base.Update(2, 0), Deleted: true, ModTime: 99, ModifiedBy: 9}
	if del.Wins(&a) || !a.Wins(&del) {
		t.Error("an existing file should beat a concurrent deletion")
	}
	newer := Record{Name: "f", Version: a.Version.Update(1, 0), ModTime: 1}
	if !newer.Wins(&a) || a.Wins(&newer) {
		t.Error("a dominating vector must win whatever the mtime")
	}
}
