package layer

import (
	"io"
	"sync/atomic"
)

// Counter is a reader that counts the bytes read through it. The count is
// atomic: an HTTP transport may still read a request body after the call
// that gave it returned.
type Counter interface {
	io.Reader
	Count() int64
}

// Count returns a Counter reading r. It is an io.Seeker when r is, so a
// layer counting a body does not hide from the layers above it that the
// body can be read again: without it, a retry layer outside a counting one
// copied every body it was given.
func Count(r io.Reader) Counter {
	c := &counter{r: r}
	if s, ok := r.(io.Seeker); ok {
		return &seekCounter{counter: c, s: s}
	}
	return c
}

type counter struct {
	r io.Reader
	n atomic.Int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *counter) Count() int64 { return c.n.Load() }

// Unwrap implements blob.BodyWrapper.
func (c *counter) Unwrap() io.Reader { return c.r }

// seekCounter counts every byte read, those read again after a Seek too:
// the count is of bytes moved.
type seekCounter struct {
	*counter
	s io.Seeker
}

func (c *seekCounter) Seek(off int64, whence int) (int64, error) { return c.s.Seek(off, whence) }
