package layer_test

import (
	"context"
	"io"
	"testing"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/layer"
	"lockstep/storage/blob/mem"
)

// pass is a Layer that passes every call on.
type pass struct{ inner blob.Store }

func (p *pass) Inner() blob.Store { return p.inner }
func (p *pass) Put(ctx context.Context, k string, r io.Reader, n int64) error {
	return p.inner.Put(ctx, k, r, n)
}
func (p *pass) Get(ctx context.Context, k string, fn func(io.Reader) error) error {
	return p.inner.Get(ctx, k, fn)
}
func (p *pass) Stat(ctx context.Context, k string) (blob.Info, error) { return p.inner.Stat(ctx, k) }
func (p *pass) Delete(ctx context.Context, k string) error            { return p.inner.Delete(ctx, k) }
func (p *pass) DeleteBatch(ctx context.Context, k []string) ([]string, error) {
	return blob.DeleteBatch(ctx, p.inner, k)
}
func (p *pass) List(ctx context.Context, pre string, fn func(blob.Info) error) error {
	return p.inner.List(ctx, pre, fn)
}
func (p *pass) Create(ctx context.Context, k string, r io.Reader, n int64) error {
	return p.inner.(blob.Creator).Create(ctx, k, r, n)
}
func (p *pass) PutUnsynced(ctx context.Context, k string, r io.Reader, n int64) error {
	return p.inner.(blob.Batcher).PutUnsynced(ctx, k, r, n)
}
func (p *pass) Sync(ctx context.Context) error { return p.inner.(blob.Batcher).Sync(ctx) }
func (p *pass) GetRange(ctx context.Context, k string, off, n int64, fn func(io.Reader) error) error {
	return p.inner.(blob.RangeReader).GetRange(ctx, k, off, n, fn)
}

// partial shows only some abilities of a mem.Store, and a MaxKeyLen.
type (
	only struct{ blob.Store }
	c    struct {
		blob.Store
		blob.Creator
	}
	b struct {
		blob.Store
		blob.Batcher
	}
	r struct {
		blob.Store
		blob.RangeReader
	}
	cb struct {
		blob.Store
		blob.Creator
		blob.Batcher
	}
	cr struct {
		blob.Store
		blob.Creator
		blob.RangeReader
	}
	br struct {
		blob.Store
		blob.Batcher
		blob.RangeReader
	}
	short struct{ blob.Store }
)

func (short) MaxKeyLen() int { return 100 }

// TestAbilitiesPreserved checks that a wrapped store has exactly the
// optional abilities of the store it wraps, for all eight combinations,
// through two layers.
func TestAbilitiesPreserved(t *testing.T) {
	m := mem.New()
	inners := []blob.Store{
		only{m}, c{m, m}, b{m, m}, r{m, m}, cb{m, m, m}, cr{m, m, m}, br{m, m, m}, m,
		struct {
			only
			clean
		}{only{m}, clean{}},
		struct {
			c
			clean
		}{c{m, m}, clean{}},
		struct {
			b
			clean
		}{b{m, m}, clean{}},
		struct {
			r
			clean
		}{r{m, m}, clean{}},
		struct {
			cb
			clean
		}{cb{m, m, m}, clean{}},
		struct {
			cr
			clean
		}{cr{m, m, m}, clean{}},
		struct {
			br
			clean
		}{br{m, m, m}, clean{}},
		struct {
			*mem.Store
			clean
		}{m, clean{}},
	}
	for _, inner := range inners {
		w := layer.Wrap(&pass{layer.Wrap(&pass{inner})})
		for _, ab := range []struct {
			name     string
			has, got bool
		}{
			{"Creator", is[blob.Creator](inner), is[blob.Creator](w)},
			{"Batcher", is[blob.Batcher](inner), is[blob.Batcher](w)},
			{"RangeReader", is[blob.RangeReader](inner), is[blob.RangeReader](w)},
			{"Cleaner", is[layer.Cleaner](inner), is[layer.Cleaner](w)},
		} {
			if ab.has != ab.got {
				t.Errorf("inner %T has %s: %v, wrapped: %v", inner, ab.name, ab.has, ab.got)
			}
		}
		if u, ok := w.(interface{ Unwrap() blob.Store }); !ok {
			t.Errorf("wrapped %T has no Unwrap", inner)
		} else if u2, ok := u.Unwrap().(interface{ Unwrap() blob.Store }); !ok || u2.Unwrap() != inner {
			t.Errorf("unwrapping twice does not give the inner %T", inner)
		}
	}
}

// clean adds local.Store's Clean method to a struct that embeds it.
type clean struct{}

func (clean) Clean(context.Context, time.Time) (int, error) { return 7, nil }

func TestCleanPassedOn(t *testing.T) {
	w := layer.Wrap(&pass{layer.Wrap(&pass{struct {
		*mem.Store
		clean
	}{mem.New(), clean{}}})})
	if n, err := w.(layer.Cleaner).Clean(t.Context(), time.Now()); n != 7 || err != nil {
		t.Errorf("Clean through two layers = %d, %v; want the inner's 7", n, err)
	}
}

func is[T any](s blob.Store) bool {
	_, ok := s.(T)
	return ok
}

func TestMaxKeyLenPassedOn(t *testing.T) {
	if got := layer.MaxKeyLen(layer.Wrap(&pass{short{mem.New()}})); got != 100 {
		t.Errorf("MaxKeyLen through a layer = %d, want the inner's 100", got)
	}
	if got := layer.MaxKeyLen(layer.Wrap(&pass{mem.New()})); got != blob.MaxKeyLen {
		t.Errorf("MaxKeyLen of a layer over a store without one = %d, want %d", got, blob.MaxKeyLen)
	}
}

// marked is a second Layer type for Find to look for.
type marked struct{ pass }

func TestFind(t *testing.T) {
	m := mem.New()
	mk := &marked{pass{m}}
	s := layer.Wrap(&pass{layer.Wrap(mk)})
	if got, ok := layer.Find[*marked](s); !ok || got != mk {
		t.Errorf("Find = %v, %v; want the marked layer", got, ok)
	}
	if _, ok := layer.Find[*marked](layer.Wrap(&pass{m})); ok {
		t.Error("Find found a layer that is not there")
	}
	if _, ok := layer.Of(m); ok {
		t.Error("Of found a layer in a plain store")
	}
}
