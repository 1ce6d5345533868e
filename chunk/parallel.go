package chunk

import (
	"context"
	"errors"
	"io"
	"sync"
)

// MinSegment is the smallest part of a stream SplitParallel gives a
// goroutine of its own: below it, stitching the parts back together (about
// one chunk read twice per part) costs more than the parallelism saves.
const MinSegment = 16 << 20

// errConverged stops a stitching pass once it meets a part's boundaries.
var errConverged = errors.New("converged")

// SplitParallel cuts the size bytes of r into exactly the chunks Split
// would give for them, with one goroutine per Splitter of sps (at most one
// per MinSegment bytes), and calls fn for each chunk in stream order from
// the calling goroutine. It waits for every goroutine it starts.
//
// Each goroutine cuts one part of the stream as if the part started a
// stream. Where a part begins, the true chunks come from the part before
// it: they are cut again from the last true boundary before the part until
// one ends on a boundary the part's goroutine found. From any true boundary
// on, cutting depends on nothing before it (the chunker resets its state at
// each cut), so the rest of that part's boundaries are true too. Usually
// that happens within a chunk or two; for data whose cuts never line up
// (a long run that cuts only at MaxSize) the stitching cuts the rest
// sequentially, still correct.
//
// If r holds fewer than size bytes, the chunks are those of the bytes it
// holds, as Split would give them. sps must not be empty. Errors: a read
// error from r (wrapped, as Split wraps it), ctx's error once it ends
// (checked at every chunk), or an error from fn, unchanged; no more calls
// of fn follow any of them.
func SplitParallel(ctx context.Context, r io.ReaderAt, size int64, sps []*Splitter, fn func(Chunk) error) error {
	return splitParallel(ctx, r, size, sps, MinSegment, fn)
}

// Parts returns how many goroutines SplitParallel would use for a stream
// of size bytes with n Splitters: the Splitters worth asking for.
func Parts(size int64, n int) int {
	return partCount(size, n, MinSegment)
}

// partCount is Parts with parts of at least minSegment bytes.
func partCount(size int64, n int, minSegment int64) int {
	return max(1, int(min(int64(n), size/minSegment)))
}

// splitParallel is SplitParallel with parts of at least minSegment bytes,
// so tests can stitch many parts of a small stream.
func splitParallel(ctx context.Context, r io.ReaderAt, size int64, sps []*Splitter, minSegment int64, fn func(Chunk) error) error {
	n := partCount(size, len(sps), minSegment)
	if n == 1 {
		return sps[0].Split(io.NewSectionReader(r, 0, size), func(c Chunk, _ []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fn(c)
		})
	}
	parts := cutParts(ctx, r, size, sps[:n])
	for i := range parts {
		if parts[i].err != nil {
			return parts[i].err
		}
	}
	last := len(parts) - 1
	k, from := 0, 0 // part whose chunks are followed, and the first true one
	for {
		p := &parts[k]
		if k == last {
			// The last part ends where the stream does: all its chunks
			// from a true boundary on are true.
			for _, c := range p.chunks[from:] {
				if err := fn(c); err != nil {
					return err
				}
			}
			return nil
		}
		// The part's final chunk ends only because the part does. A part
		// with no chunks read nothing (the stream is shorter than size):
		// only the first can be followed so, from its start.
		start := p.start
		if end := len(p.chunks) - 1; end >= 0 {
			for _, c := range p.chunks[from:end] {
				if err := fn(c); err != nil {
					return err
				}
			}
			start = p.chunks[end].Offset
		}
		next, at, err := stitch(ctx, r, size, start, sps[0], parts[k+1:], fn)
		if err != nil || next < 0 {
			return err
		}
		k, from = k+1+next, at
	}
}

// part is one goroutine's share of a stream and the chunks it cut.
type part struct {
	start, end int64
	chunks     []Chunk
	starts     map[int64]int // chunk index by offset
	err        error
}

// cutParts cuts size bytes of r in len(sps) parts of about equal size, one
// goroutine each.
func cutParts(ctx context.Context, r io.ReaderAt, size int64, sps []*Splitter) []part {
	n := int64(len(sps))
	parts := make([]part, n)
	var wg sync.WaitGroup
	for k := range parts {
		p := &parts[k]
		p.start, p.end = size*int64(k)/n, size*int64(k+1)/n
		wg.Go(func() {
			p.starts = make(map[int64]int)
			p.err = sps[k].Split(io.NewSectionReader(r, p.start, p.end-p.start), func(c Chunk, _ []byte) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				c.Offset += p.start
				p.starts[c.Offset] = len(p.chunks)
				p.chunks = append(p.chunks, c)
				return nil
			})
		})
	}
	wg.Wait()
	return parts
}

// stitch cuts r sequentially from start, a true boundary, calling fn for
// each chunk, until a chunk ends where a chunk of one of parts starts. It
// returns that part's index in parts and the chunk's, or next = -1 when it
// reached the end of the stream first.
func stitch(ctx context.Context, r io.ReaderAt, size, start int64, sp *Splitter, parts []part, fn func(Chunk) error) (next, at int, err error) {
	next = -1
	err = sp.Split(io.NewSectionReader(r, start, size-start), func(c Chunk, _ []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.Offset += start
		if err := fn(c); err != nil {
			return err
		}
		end := c.Offset + int64(c.Size)
		for j := range parts {
			if end >= parts[j].start && end < parts[j].end {
				if i, ok := parts[j].starts[end]; ok {
					next, at = j, i
					return errConverged
				}
				break
			}
		}
		return nil
	})
	if errors.Is(err, errConverged) {
		err = nil
	}
	return next, at, err
}
