// Package layer builds the wrappers of storage/blob (retry, limit, logged,
// metered): it turns a Layer, which implements every method of blob.Store
// and its optional abilities, into a blob.Store that has exactly the
// optional abilities of the store the layer wraps.
//
// Invariants:
//   - The value Wrap returns implements blob.Creator, blob.Batcher,
//     blob.RangeReader and Cleaner if and only if the inner store does, so
//     a caller's type assertion gives the same answer through any stack of
//     layers; a layer is never asked for an ability its inner store lacks.
//   - It always implements blob.BatchDeleter: the layer passes a batch to
//     the inner store's DeleteBatch, or deletes key by key without one.
//   - It also has Unwrap() blob.Store, returning the inner store, and
//     MaxKeyLen() int, the inner store's MaxKeyLen or blob.MaxKeyLen.
//   - Of finds the Layer behind a value Wrap returned, so a layer's own
//     package can reach its state (a meter's counts) through a stack.
//
// The 2^4 combinations (with Cleaner, local.Store's Clean) are spelled out
// as sixteen struct types embedding only the interfaces that apply: a type
// assertion sees the method set of the concrete type, so one struct with
// all methods would claim abilities the inner store lacks, and a wrapper
// that answered "not supported" at run time would break callers that
// choose a path by type assertion. A small set of fixed types, unlike
// reflection or code generated at run time, is checked by the compiler.
package layer

import (
	"context"
	"time"

	"lockstep/storage/blob"
)

// Layer is a wrapper with every method. Wrap exposes only those the inner
// store supports, so the ability methods are called only when Inner has
// them.
type Layer interface {
	blob.Store
	blob.Creator
	blob.Batcher
	blob.RangeReader
	blob.BatchDeleter
	// Inner returns the wrapped store.
	Inner() blob.Store
}

// base is what every wrapped store shows. Every one has DeleteBatch: over
// a store without it, the layer's DeleteBatch is blob.DeleteBatch's
// fallback (one Delete per key), so showing it claims nothing false.
type base interface {
	blob.Store
	blob.BatchDeleter
	Unwrap() blob.Store
	MaxKeyLen() int
	layer() Layer
}

// core adapts a Layer to base.
type core struct{ Layer }

func (c core) Unwrap() blob.Store { return c.Inner() }

func (c core) MaxKeyLen() int { return MaxKeyLen(c.Inner()) }

func (c core) layer() Layer { return c.Layer }

// Cleaner is the optional ability of local.Store to remove the temporary
// files writes interrupted by a crash left behind, which sync/receiver
// finds by type assertion. A wrapped store passes it straight to the inner
// store: it is maintenance of the store's own files, no call to retry,
// limit, log or meter.
type Cleaner interface {
	Clean(ctx context.Context, before time.Time) (int, error)
}

// Wrap returns l as a blob.Store with the optional abilities of l.Inner()
// (blob.Creator, blob.Batcher, blob.RangeReader, Cleaner) and no others.
func Wrap(l Layer) blob.Store {
	inner := l.Inner()
	mask := 0
	if _, ok := inner.(blob.Creator); ok {
		mask |= 1
	}
	if _, ok := inner.(blob.Batcher); ok {
		mask |= 2
	}
	if _, ok := inner.(blob.RangeReader); ok {
		mask |= 4
	}
	x, ok := inner.(Cleaner)
	if ok {
		mask |= 8
	}
	return makers[mask](core{l}, l, x)
}

// Of returns the Layer behind s if s was made by Wrap.
func Of(s blob.Store) (Layer, bool) {
	if w, ok := s.(interface{ layer() Layer }); ok {
		return w.layer(), true
	}
	return nil, false
}

// Find walks down a stack of layers from s and returns the first Layer of
// type L.
func Find[L Layer](s blob.Store) (L, bool) {
	for {
		l, ok := Of(s)
		if !ok {
			var zero L
			return zero, false
		}
		if t, ok := l.(L); ok {
			return t, true
		}
		s = l.Inner()
	}
}

// keyLimiter is implemented by stores that hold only keys shorter than
// blob.MaxKeyLen (an S3 store under a prefix).
type keyLimiter interface{ MaxKeyLen() int }

// MaxKeyLen returns s's MaxKeyLen if it has one, else blob.MaxKeyLen.
func MaxKeyLen(s blob.Store) int {
	if l, ok := s.(keyLimiter); ok {
		return l.MaxKeyLen()
	}
	return blob.MaxKeyLen
}

// Sleep waits d, or returns ctx's error as soon as ctx is done: a layer's
// wait (a retry's backoff, a bandwidth limit's delay) ends with the call.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
