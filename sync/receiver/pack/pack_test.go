package pack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/blob/mem"
)

func id(b byte) []byte { return bytes.Repeat([]byte{b}, IDSize) }

// build returns a pack of the given body lengths, chunk i filled with i+1.
func build(lengths ...int) ([]byte, [][]byte) {
	var b Builder
	var bodies [][]byte
	for i, n := range lengths {
		body := bytes.Repeat([]byte{byte(i + 1)}, n)
		bodies = append(bodies, body)
		b.Add(id(byte(i+1)), body)
	}
	return b.Finish(), bodies
}

func TestRoundTrip(t *testing.T) {
	for _, lengths := range [][]int{{1}, {5, 1, 300}, {crypt.MaxSealedChunkSize}} {
		p, bodies := build(lengths...)
		entries, err := Parse(p)
		if err != nil || len(entries) != len(lengths) {
			t.Fatalf("%v: Parse = %d entries, %v", lengths, len(entries), err)
		}
		for i, e := range entries {
			if !bytes.Equal(e.ID, id(byte(i+1))) || !bytes.Equal(p[e.Offset:e.Offset+e.Length], bodies[i]) {
				t.Fatalf("%v: entry %d = %+v does not place its body", lengths, i, e)
			}
		}
		want := 0
		for _, n := range lengths {
			want += n + EntrySize
		}
		if len(p) != want+FooterSize {
			t.Fatalf("%v: pack of %d bytes, want %d", lengths, len(p), want+FooterSize)
		}
		store := mem.New()
		if err := store.Put(context.Background(), "p/x", bytes.NewReader(p), int64(len(p))); err != nil {
			t.Fatal(err)
		}
		got, err := ReadIndex(context.Background(), store, "p/x", int64(len(p)))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(entries) {
			t.Fatalf("ReadIndex = %v, %v", got, err)
		}
		// A size that is not the object's (n-1, n+1) does not parse.
		for _, size := range []int64{int64(len(p)) - 1, int64(len(p)) + 1} {
			if _, err := ReadIndex(context.Background(), store, "p/x", size); !errors.Is(err, ErrInvalid) {
				t.Errorf("ReadIndex with size %d of %d: %v, want ErrInvalid", size, len(p), err)
			}
		}
	}
	var empty Builder
	if empty.Finish() != nil {
		t.Fatal("an empty builder made a pack")
	}
}

func TestAddPanics(t *testing.T) {
	for name, add := range map[string]func(b *Builder){
		"short ID":   func(b *Builder) { b.Add(id(1)[:31], []byte{1}) },
		"empty body": func(b *Builder) { b.Add(id(1), nil) },
		"too long":   func(b *Builder) { b.Add(id(1), make([]byte, crypt.MaxSealedChunkSize+1)) },
		"twice":      func(b *Builder) { b.Add(id(1), []byte{1}); b.Add(id(1), []byte{2}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			add(new(Builder))
		}()
	}
}

// TestInvalid damages a good pack in every way the invariants name.
func TestInvalid(t *testing.T) {
	good, _ := build(10, 20, 30)
	trailerAt := len(good) - FooterSize - 3*EntrySize
	entry := func(p []byte, i int) []byte { return p[trailerAt+i*EntrySize:] }
	cases := map[string]func(p []byte) []byte{
		"no magic":         func(p []byte) []byte { p[len(p)-1] ^= 1; return p },
		"truncated":        func(p []byte) []byte { return p[:len(p)-1] },
		"only footer":      func(p []byte) []byte { return p[len(p)-FooterSize:] },
		"shorter":          func(p []byte) []byte { return p[:FooterSize-1] },
		"trailer len 0":    func(p []byte) []byte { binary.BigEndian.PutUint32(p[len(p)-FooterSize:], 0); return p },
		"trailer len odd":  func(p []byte) []byte { binary.BigEndian.PutUint32(p[len(p)-FooterSize:], 3*EntrySize-1); return p },
		"trailer too long": func(p []byte) []byte { binary.BigEndian.PutUint32(p[len(p)-FooterSize:], 4*EntrySize); return p },
		"gap":              func(p []byte) []byte { binary.BigEndian.PutUint64(entry(p, 1)[IDSize:], 11); return p },
		"first not 0":      func(p []byte) []byte { binary.BigEndian.PutUint64(entry(p, 0)[IDSize:], 1); return p },
		"zero length":      func(p []byte) []byte { binary.BigEndian.PutUint32(entry(p, 2)[IDSize+8:], 0); return p },
		"short end":        func(p []byte) []byte { binary.BigEndian.PutUint32(entry(p, 2)[IDSize+8:], 29); return p },
		"long end":         func(p []byte) []byte { binary.BigEndian.PutUint32(entry(p, 2)[IDSize+8:], 31); return p },
		"repeated ID":      func(p []byte) []byte { copy(entry(p, 1), id(1)); return p },
		"huge length": func(p []byte) []byte {
			binary.BigEndian.PutUint32(entry(p, 0)[IDSize+8:], uint32(crypt.MaxSealedChunkSize+1))
			return p
		},
	}
	for name, damage := range cases {
		if _, err := Parse(damage(bytes.Clone(good))); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Parse = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := Parse(good); err != nil {
		t.Fatalf("the good pack: %v", err)
	}
}

// FuzzParse: Parse never panics, and what it accepts is consistent.
func FuzzParse(f *testing.F) {
	p1, _ := build(1)
	p3, _ := build(10, 20, 30)
	f.Add(p1)
	f.Add(p3)
	f.Add([]byte(Magic))
	f.Add(append(make([]byte, 4), Magic...))
	f.Fuzz(func(t *testing.T, p []byte) {
		entries, err := Parse(p)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		var b Builder
		for _, e := range entries {
			b.Add(e.ID, p[e.Offset:e.Offset+e.Length])
		}
		if !bytes.Equal(b.Finish(), p) {
			t.Fatal("a parsed pack does not rebuild to the same bytes")
		}
	})
}
