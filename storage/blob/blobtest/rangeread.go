package blobtest

import (
	"context"
	"errors"
	"io"
	"testing"

	"lockstep/storage/blob"
)

// testGetRange checks blob.GetRange: through the store's RangeReader when
// it has one (every store of this module does), and through the fallback
// on a store that hides it. Ranges at and around both ends of the blob.
func testGetRange(t *testing.T, s blob.Store) {
	if _, ok := s.(blob.RangeReader); !ok {
		t.Error("store does not implement blob.RangeReader")
	}
	for _, st := range []struct {
		name  string
		store blob.Store
	}{{"native", s}, {"fallback", onlyStore{s}}} {
		t.Run(st.name, func(t *testing.T) { checkRanges(t, st.store) })
	}
}

// onlyStore hides every optional ability of the Store it wraps.
type onlyStore struct{ blob.Store }

func checkRanges(t *testing.T, s blob.Store) {
	ctx := t.Context()
	const size = 1000
	want := data(42, size)
	put(t, s, "pack/range", want)
	cases := []struct{ off, n int64 }{
		{0, 0}, {0, 1}, {0, size - 1}, {0, size}, {0, size + 1},
		{1, 10}, {500, 499}, {500, 500}, {500, 501},
		{size - 1, 1}, {size - 1, 2}, {size, 1}, {size + 1, 1}, {size, 0},
	}
	for _, c := range cases {
		var got []byte
		calls := 0
		err := blob.GetRange(ctx, s, "pack/range", c.off, c.n, func(r io.Reader) error {
			calls++
			var err error
			got, err = io.ReadAll(r)
			return err
		})
		if err != nil || calls != 1 {
			t.Fatalf("GetRange(%d, %d): %v after %d calls", c.off, c.n, err, calls)
		}
		lo, hi := min(c.off, size), min(c.off+c.n, size)
		if string(got) != string(want[lo:hi]) {
			t.Fatalf("GetRange(%d, %d) = %d bytes, want bytes [%d, %d)", c.off, c.n, len(got), lo, hi)
		}
	}
	never := func(io.Reader) error { t.Error("fn called"); return nil }
	if err := blob.GetRange(ctx, s, "pack/missing", 0, 10, never); !errors.Is(err, blob.ErrNotExist) {
		t.Errorf("GetRange of a missing blob: %v, want ErrNotExist", err)
	}
	if err := blob.GetRange(ctx, s, "pack/missing", 0, 0, never); !errors.Is(err, blob.ErrNotExist) {
		t.Errorf("empty GetRange of a missing blob: %v, want ErrNotExist", err)
	}
	for _, c := range []struct{ off, n int64 }{{-1, 1}, {0, -1}} {
		if err := blob.GetRange(ctx, s, "pack/range", c.off, c.n, never); !errors.Is(err, blob.ErrInvalidRange) {
			t.Errorf("GetRange(%d, %d): %v, want ErrInvalidRange", c.off, c.n, err)
		}
	}
	if err := blob.GetRange(ctx, s, "Bad/Key", 0, 1, never); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("GetRange of an invalid key: %v, want ErrInvalidKey", err)
	}
	if err := blob.GetRange(canceledContext(t), s, "pack/range", 0, 1, never); !errors.Is(err, context.Canceled) {
		t.Errorf("GetRange with a canceled context: %v", err)
	}
	boom := errors.New("boom")
	if err := blob.GetRange(ctx, s, "pack/range", 0, 1, func(io.Reader) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("GetRange: fn's error came back as %v", err)
	}
}
