package chunk

import (
	"fmt"
	"io"

	"github.com/restic/chunker"
)

// readSize is the least a Splitter reads at once, beyond a chunk it holds.
const readSize = 1 << 20

// Splitter cuts streams into content-defined chunks with one polynomial.
//
// A Splitter reuses its buffer (MaxSize plus 1 MiB) across streams. It is
// not safe for concurrent use: use one per goroutine.
type Splitter struct {
	pol chunker.Pol
	tab *tables
	buf []byte
}

// NewSplitter returns a Splitter that cuts with pol. pol must be an
// irreducible polynomial of degree PolynomialDegree, as returned by
// chunker.RandomPolynomial or chunker.DerivePolynomial; anything else is
// ErrPolynomial.
func NewSplitter(pol chunker.Pol) (*Splitter, error) {
	if pol.Deg() != PolynomialDegree {
		return nil, fmt.Errorf("%w: %v has degree %d, want %d", ErrPolynomial, pol, pol.Deg(), PolynomialDegree)
	}
	if !pol.Irreducible() {
		return nil, fmt.Errorf("%w: %v is reducible", ErrPolynomial, pol)
	}
	return &Splitter{pol: pol, tab: tablesFor(pol), buf: make([]byte, MaxSize+readSize)}, nil
}

// Split reads r to EOF and calls fn once for each chunk, in stream order.
// The chunks cover the stream contiguously: the first starts at offset 0 and
// each next one starts where the previous one ended. A stream shorter than
// MinSize is one chunk; an empty stream gives no chunks and no calls.
//
// data holds the chunk's bytes and is valid only during the call: the buffer
// is reused for the next chunk, so fn must copy what it keeps. A read error
// from r stops Split and is returned wrapped (errors.Is finds it); an error
// from fn stops Split and is returned unchanged. r is not used after Split
// returns.
func (s *Splitter) Split(r io.Reader, fn func(c Chunk, data []byte) error) error {
	return s.cut(r, func(off int64, data []byte) error {
		return fn(Chunk{Offset: off, Size: uint32(len(data)), Hash: HashOf(data)}, data)
	})
}

// Chunks returns the chunks of the stream r, as Split would report them.
func (s *Splitter) Chunks(r io.Reader) ([]Chunk, error) {
	var cs []Chunk
	err := s.Split(r, func(c Chunk, _ []byte) error {
		cs = append(cs, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cs, nil
}

// cut is Split without hashing: it calls fn with each chunk's offset and
// bytes. It is separate so that benchmarks can time the chunker alone.
//
// The buffer holds the chunk being cut from its start; a chunk ends at the
// first cut at least MinSize into it (see findCut), at MaxSize, or where
// the stream does.
func (s *Splitter) cut(r io.Reader, fn func(off int64, data []byte) error) error {
	buf := s.buf
	var (
		base   int64 // stream offset of buf[0]
		start  int   // the chunk's first byte in buf
		filled int   // bytes in buf
		next   int   // ends up to here are known not to cut the chunk
		eof    bool
	)
	for {
		limit := start + MaxSize
		to := min(limit, filled)
		final := eof || limit <= filled
		end := -1
		if from := max(next, start+MinSize-1); from < to {
			end, next = s.tab.findCut(buf, from, to, final)
		}
		if end < 0 && final {
			end = to
		}
		if end > start {
			if err := fn(base+int64(start), buf[start:end]); err != nil {
				return err
			}
			start, next = end, 0
			continue
		}
		if eof {
			return nil
		}
		if filled == len(buf) {
			// The chunk so far is under MaxSize, so at least readSize is
			// free once it moves to the front.
			n := copy(buf, buf[start:filled])
			base += int64(start)
			next = max(next-start, 0)
			start, filled = 0, n
		}
		n, err := io.ReadFull(r, buf[filled:])
		filled += n
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			eof = true
		case err != nil:
			return fmt.Errorf("chunk: reading stream: %w", err)
		}
	}
}
