// Package sized provides Reader, the reader every blob store wraps around
// the data given to Put and Create and around the data handed to Get's
// callback. It stops at the first error of its context and enforces the
// declared size, so each store gets those two rules right in one place.
//
// Invariant: once Read has returned an error other than io.EOF, every later
// Read returns that same error.
package sized

import (
	"context"
	"fmt"
	"io"

	"lockstep/storage/blob"
)

// maxEmptyReads bounds how often the probe for surplus bytes accepts a
// (0, nil) result before giving up with io.ErrNoProgress.
const maxEmptyReads = 100

// Reader reads from an underlying reader while checking a context and,
// when the size is known, that the underlying reader yields exactly that many
// bytes. It is not safe for concurrent use.
type Reader struct {
	ctx  context.Context
	r    io.Reader
	size int64
	n    int64
	err  error
}

// NewReader returns a Reader over r. size is the exact number of bytes r
// must yield, or -1 if unknown. Read fails with ctx.Err() once ctx is done,
// and with an error wrapping blob.ErrSizeMismatch if r yields fewer or more
// than size bytes; the surplus check reads one byte past size before
// reporting io.EOF.
func NewReader(ctx context.Context, r io.Reader, size int64) *Reader {
	return &Reader{ctx: ctx, r: r, size: size}
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return 0, err
	}
	if r.size >= 0 {
		if r.n == r.size {
			return 0, r.fail(r.probe())
		}
		if rem := r.size - r.n; int64(len(p)) > rem {
			p = p[:rem]
		}
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	if r.size >= 0 {
		switch {
		case err == io.EOF && r.n < r.size:
			err = fmt.Errorf("%w: read %d bytes, want %d", blob.ErrSizeMismatch, r.n, r.size)
		case err == nil && r.n == r.size:
			err = r.probe()
		}
	}
	return n, r.fail(err)
}

// N returns the number of bytes read so far.
func (r *Reader) N() int64 { return r.n }

// Err returns the error that stopped the reader (the context's, the
// underlying reader's or a size mismatch), or nil if none did.
func (r *Reader) Err() error { return r.err }

// probe reads one byte past the declared size: io.EOF if there is none, an
// error wrapping blob.ErrSizeMismatch if there is.
func (r *Reader) probe() error {
	var b [1]byte
	for range maxEmptyReads {
		n, err := r.r.Read(b[:])
		if n > 0 {
			return fmt.Errorf("%w: more than %d bytes", blob.ErrSizeMismatch, r.size)
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// fail records err if it stops the reader for good and returns it.
func (r *Reader) fail(err error) error {
	if err != nil && err != io.EOF {
		r.err = err
	}
	return err
}
