// Package layer builds the wrappers of storage/blob (retry, limit, logged,
// metered): it turns a Layer, which implements every method of blob.Store
// and its optional abilities, into a blob.Store that has exactly the
// optional abilities of the store the layer wraps.
//
// Invariants:
//   - The value Wrap returns implements blob.Creator, blob.Batcher and
//     blob.RangeReader if and only if the inner store does, so a caller's
//     type assertion gives the same answer through any stack of layers; a
//     layer is never asked for an ability its inner store lacks.
//   - It also has Unwrap() blob.Store, returning the inner store, and
//     MaxKeyLen() int, the inner store's MaxKeyLen or blob.MaxKeyLen.
//   - Of finds the Layer behind a value Wrap returned, so a layer's own
//     package can reach its state (a meter's counts) through a stack.
//
// The 2^3 combinations are spelled out as eight struct types embedding
// only the interfaces that apply: a type assertion sees the method set of
// the concrete type, so one struct with all methods would claim abilities
// the inner store lacks, and a wrapper that answered "not supported" at
// run time would break callers that choose a path by type assertion.
package layer

import (
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
	// Inner returns the wrapped store.
	Inner() blob.Store
}

// base is what every wrapped store shows.
type base interface {
	blob.Store
	Unwrap() blob.Store
	MaxKeyLen() int
}

// core adapts a Layer to base.
type core struct{ Layer }

func (c core) Unwrap() blob.Store { return c.Inner() }

func (c core) MaxKeyLen() int { return MaxKeyLen(c.Inner()) }

// The combinations: C = Creator, B = Batcher, R = RangeReader.
type (
	plain struct{ base }
	withC struct {
		base
		blob.Creator
	}
	withB struct {
		base
		blob.Batcher
	}
	withR struct {
		base
		blob.RangeReader
	}
	withCB struct {
		base
		blob.Creator
		blob.Batcher
	}
	withCR struct {
		base
		blob.Creator
		blob.RangeReader
	}
	withBR struct {
		base
		blob.Batcher
		blob.RangeReader
	}
	withCBR struct {
		base
		blob.Creator
		blob.Batcher
		blob.RangeReader
	}
)

// Wrap returns l as a blob.Store with the optional abilities of l.Inner()
// and no others.
func Wrap(l Layer) blob.Store {
	inner := l.Inner()
	_, c := inner.(blob.Creator)
	_, b := inner.(blob.Batcher)
	_, r := inner.(blob.RangeReader)
	bs := core{l}
	switch {
	case c && b && r:
		return withCBR{bs, l, l, l}
	case c && b:
		return withCB{bs, l, l}
	case c && r:
		return withCR{bs, l, l}
	case b && r:
		return withBR{bs, l, l}
	case c:
		return withC{bs, l}
	case b:
		return withB{bs, l}
	case r:
		return withR{bs, l}
	default:
		return plain{bs}
	}
}

// Of returns the Layer behind s if s was made by Wrap.
func Of(s blob.Store) (Layer, bool) {
	var b base
	switch w := s.(type) {
	case plain:
		b = w.base
	case withC:
		b = w.base
	case withB:
		b = w.base
	case withR:
		b = w.base
	case withCB:
		b = w.base
	case withCR:
		b = w.base
	case withBR:
		b = w.base
	case withCBR:
		b = w.base
	default:
		return nil, false
	}
	return b.(core).Layer, true
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
