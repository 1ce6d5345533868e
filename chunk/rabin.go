package chunk

import (
	"sync"

	"github.com/restic/chunker"
)

// The fingerprint is the one github.com/restic/chunker computes, computed
// here four windows at a time.
//
// The chunker's loop is bound by latency, not work: each byte's
// fingerprint needs the previous one, through a table lookup, so one
// window runs at ~700 MB/s however wide the core. But the fingerprint at a
// position depends only on the 64 bytes of the window ending there, not
// on where the chunk started, so four parts of the stretch where a cut may
// fall can be fingerprinted at once, each from its own first 64 bytes, and
// the core overlaps the four chains. The cut is the first position, in
// stream order, whose fingerprint has the low AverageBits bits zero, as
// the chunker's. The chunker's tables (computed from the polynomial with
// its exported arithmetic) and its rules (skip the first MinSize-64 bytes
// of a chunk, cut at MaxSize, the last chunk ends with the stream) are
// kept exactly: TestCutMatchesChunker and FuzzCutMatchesChunker compare
// every boundary with the library's.

const (
	windowSize = 64 // bytes in the fingerprint's window, as the chunker's
	// polShift brings a fingerprint's top byte down: the degree is always
	// PolynomialDegree, so the shift is a constant.
	polShift = PolynomialDegree - 8
	cutMask  = 1<<AverageBits - 1
	// laneLen is how many positions each of the four lanes fingerprints
	// per round. A cut falls on average 2^AverageBits bytes into the
	// stretch where one may fall, so the positions fingerprinted beyond
	// it (half a round, on average) are about 6% more than the chunker's.
	// 4, 8 and 16 KiB ran alike (BenchmarkSplit); 32 KiB was 10% slower.
	laneLen = 8 << 10
)

// tables are the chunker's lookup tables for one polynomial: out removes
// the byte leaving the window, mod reduces after a byte is shifted in.
type tables struct {
	out [256]uint64
	mod [256]uint64
}

var tableCache sync.Map // chunker.Pol -> *tables

// tablesFor returns the tables of pol, an irreducible polynomial of degree
// PolynomialDegree, computing them once per process.
func tablesFor(pol chunker.Pol) *tables {
	if t, ok := tableCache.Load(pol); ok {
		return t.(*tables)
	}
	t := new(tables)
	for b := range 256 {
		// out[b] is the fingerprint of b followed by 63 zero bytes: adding
		// it removes b from the front of a window.
		var h chunker.Pol
		h = appendByte(h, byte(b), pol)
		for range windowSize - 1 {
			h = appendByte(h, 0, pol)
		}
		t.out[b] = uint64(h)
		// mod[b] clears the top byte b after a shift and adds its
		// reduction modulo pol.
		t.mod[b] = uint64(chunker.Pol(uint64(b)<<PolynomialDegree).Mod(pol) | chunker.Pol(uint64(b)<<PolynomialDegree))
	}
	v, _ := tableCache.LoadOrStore(pol, t)
	return v.(*tables)
}

func appendByte(h chunker.Pol, b byte, pol chunker.Pol) chunker.Pol {
	return (h<<8 | chunker.Pol(b)).Mod(pol)
}

// warm returns the fingerprint of the window w (64 bytes).
func (t *tables) warm(w []byte) uint64 {
	var d uint64
	for _, b := range w[:windowSize] {
		d = (d<<8 | uint64(b)) ^ t.mod[byte(d>>polShift)]
	}
	return d
}

// findCut returns the first end e in (from, to] whose window buf[e-64:e]
// has a fingerprint with the low AverageBits bits zero, or -1 and the end
// up to which it looked. It needs buf[from-64:to]; from must be at least
// 64. Unless final (no end after to can matter), it looks only in whole
// rounds and leaves the rest for when more data is there.
func (t *tables) findCut(buf []byte, from, to int, final bool) (cut, checked int) {
	for to-from >= 4*laneLen {
		if e := t.round(buf, from); e >= 0 {
			return e, e
		}
		from += 4 * laneLen
	}
	if !final || from >= to {
		return -1, from
	}
	d := t.warm(buf[from-windowSize : from])
	for i := from; i < to; i++ {
		d ^= t.out[buf[i-windowSize]]
		d = (d<<8 | uint64(buf[i])) ^ t.mod[byte(d>>polShift)]
		if d&cutMask == 0 {
			return i + 1, i + 1
		}
	}
	return -1, to
}

// round fingerprints the ends (from, from+4·laneLen] in four lanes of
// laneLen each, interleaved, and returns the first cut among them, or -1.
func (t *tables) round(buf []byte, from int) int {
	const n = laneLen + windowSize
	l0 := buf[from-windowSize:][:n]
	l1 := buf[from+laneLen-windowSize:][:n]
	l2 := buf[from+2*laneLen-windowSize:][:n]
	l3 := buf[from+3*laneLen-windowSize:][:n]
	d0, d1, d2, d3 := t.warm(l0), t.warm(l1), t.warm(l2), t.warm(l3)
	h0, h1, h2, h3 := -1, -1, -1, -1
	out, mod := &t.out, &t.mod
	for i := windowSize; i < n; i++ {
		d0 ^= out[l0[i-windowSize]]
		d1 ^= out[l1[i-windowSize]]
		d2 ^= out[l2[i-windowSize]]
		d3 ^= out[l3[i-windowSize]]
		d0 = (d0<<8 | uint64(l0[i])) ^ mod[byte(d0>>polShift)]
		d1 = (d1<<8 | uint64(l1[i])) ^ mod[byte(d1>>polShift)]
		d2 = (d2<<8 | uint64(l2[i])) ^ mod[byte(d2>>polShift)]
		d3 = (d3<<8 | uint64(l3[i])) ^ mod[byte(d3>>polShift)]
		if d0&cutMask == 0 && h0 < 0 {
			h0 = i
		}
		if d1&cutMask == 0 && h1 < 0 {
			h1 = i
		}
		if d2&cutMask == 0 && h2 < 0 {
			h2 = i
		}
		if d3&cutMask == 0 && h3 < 0 {
			h3 = i
		}
	}
	// Index i of lane k holds the byte at from + k·laneLen - 64 + i, the
	// last of the window that ends the chunk one byte later.
	switch {
	case h0 >= 0:
		return from + h0 - windowSize + 1
	case h1 >= 0:
		return from + laneLen + h1 - windowSize + 1
	case h2 >= 0:
		return from + 2*laneLen + h2 - windowSize + 1
	case h3 >= 0:
		return from + 3*laneLen + h3 - windowSize + 1
	}
	return -1
}
