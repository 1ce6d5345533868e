package chunk

import (
	"fmt"
	"io"

	"github.com/restic/chunker"
)

// Splitter cuts streams into content-defined chunks with one polynomial.
//
// A Splitter reuses its buffers (about MaxSize plus 512 KiB) across streams.
// It is not safe for concurrent use: use one per goroutine.
type Splitter struct {
	pol chunker.Pol
	rc  *chunker.Chunker
	buf []byte // chunk data buffer handed to fn; capacity MaxSize
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
	return &Splitter{
		pol: pol,
		rc:  chunker.NewWithBoundaries(nil, pol, MinSize, MaxSize),
		buf: make([]byte, 0, MaxSize),
	}, nil
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
func (s *Splitter) cut(r io.Reader, fn func(off int64, data []byte) error) error {
	s.rc.ResetWithBoundaries(r, s.pol, MinSize, MaxSize)
	s.rc.SetAverageBits(AverageBits)
	// Drop the reference to r however we leave, so that a Splitter kept in
	// a pool does not pin the caller's reader.
	defer s.rc.ResetWithBoundaries(nil, s.pol, MinSize, MaxSize)
	for {
		c, err := s.rc.Next(s.buf)
		// Only the bare io.EOF ends a stream, as the chunker itself tests it:
		// a reader's wrapped EOF is an error, and the chunker has dropped
		// the bytes of the chunk in progress.
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("chunk: reading stream: %w", err)
		}
		// Next appends into s.buf[:0]; it never grows past MaxSize, but keep
		// whatever it used so a reallocation is never repeated.
		s.buf = c.Data[:0]
		if err := fn(int64(c.Start), c.Data); err != nil {
			return err
		}
	}
}
