// The sixteen combinations of optional abilities a wrapped store may show;
// see Wrap. Mechanical: each embeds base and the interfaces its name lists.

package layer

import "lockstep/storage/blob"

// The combinations: C = Creator, B = Batcher, R = RangeReader, X = Cleaner.
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
	withCB struct {
		base
		blob.Creator
		blob.Batcher
	}
	withR struct {
		base
		blob.RangeReader
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
	withX struct {
		base
		Cleaner
	}
	withCX struct {
		base
		blob.Creator
		Cleaner
	}
	withBX struct {
		base
		blob.Batcher
		Cleaner
	}
	withCBX struct {
		base
		blob.Creator
		blob.Batcher
		Cleaner
	}
	withRX struct {
		base
		blob.RangeReader
		Cleaner
	}
	withCRX struct {
		base
		blob.Creator
		blob.RangeReader
		Cleaner
	}
	withBRX struct {
		base
		blob.Batcher
		blob.RangeReader
		Cleaner
	}
	withCBRX struct {
		base
		blob.Creator
		blob.Batcher
		blob.RangeReader
		Cleaner
	}
)

// makers[mask] builds the combination whose abilities are the bits of
// mask: 1 Creator, 2 Batcher, 4 RangeReader, 8 Cleaner.
var makers = [16]func(b base, l Layer, x Cleaner) blob.Store{
	func(b base, l Layer, x Cleaner) blob.Store { return plain{b} },
	func(b base, l Layer, x Cleaner) blob.Store { return withC{b, l} },
	func(b base, l Layer, x Cleaner) blob.Store { return withB{b, l} },
	func(b base, l Layer, x Cleaner) blob.Store { return withCB{b, l, l} },
	func(b base, l Layer, x Cleaner) blob.Store { return withR{b, l} },
	func(b base, l Layer, x Cleaner) blob.Store { return withCR{b, l, l} },
	func(b base, l Layer, x Cleaner) blob.Store { return withBR{b, l, l} },
	func(b base, l Layer, x Cleaner) blob.Store { return withCBR{b, l, l, l} },
	func(b base, l Layer, x Cleaner) blob.Store { return withX{b, x} },
	func(b base, l Layer, x Cleaner) blob.Store { return withCX{b, l, x} },
	func(b base, l Layer, x Cleaner) blob.Store { return withBX{b, l, x} },
	func(b base, l Layer, x Cleaner) blob.Store { return withCBX{b, l, l, x} },
	func(b base, l Layer, x Cleaner) blob.Store { return withRX{b, l, x} },
	func(b base, l Layer, x Cleaner) blob.Store { return withCRX{b, l, l, x} },
	func(b base, l Layer, x Cleaner) blob.Store { return withBRX{b, l, l, x} },
	func(b base, l Layer, x Cleaner) blob.Store { return withCBRX{b, l, l, l, x} },
}
