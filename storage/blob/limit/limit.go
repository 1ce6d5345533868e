// Package limit is a blob.Store wrapper that bounds how many calls are in
// flight in the store it wraps and, optionally, how fast blobs are
// uploaded and downloaded.
//
// Invariants:
//   - At most Options.Concurrency calls run in the inner store at once. A
//     call holds its slot from before it reaches the inner store until it
//     returns, Get's and GetRange's callback included (the download is in
//     flight while the callback reads); List gives its slot back while its
//     callback runs and takes one again before reading on, so a callback
//     that calls the store (a collector deleting what it lists) neither
//     deadlocks nor counts as two calls.
//   - Get's callback must not wait for other calls of the same store: with
//     every slot held by such Gets, none could proceed.
//   - A call waiting for a slot or for bandwidth gives up as soon as its
//     context is done, with an error that matches the context's error.
//   - Options.Upload and Options.Download bound the bytes per second read
//     from the readers given to Put, Create and PutUnsynced and read by the
//     callbacks of Get and GetRange, summed over all calls. A burst of up
//     to a quarter of a second's worth (at least 1 KiB, at most 256 KiB) may
//     pass at once.
//   - The wrapper has exactly the optional abilities (Creator, Batcher,
//     RangeReader) of the store it wraps.
package limit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/time/rate"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/layer"
)

// Options say what to limit. Zero values mean no limit.
type Options struct {
	// Concurrency is the most calls in flight at once.
	Concurrency int
	// Upload and Download are the most bytes per second written to and
	// read from the store.
	Upload, Download int64
}

// New returns s wrapped with the limits of o, with the optional abilities
// of s.
func New(s blob.Store, o Options) blob.Store {
	l := &store{inner: s}
	if o.Concurrency > 0 {
		l.slots = make(chan struct{}, o.Concurrency)
	}
	l.up = newLimiter(o.Upload)
	l.down = newLimiter(o.Download)
	return layer.Wrap(l)
}

func newLimiter(bps int64) *rate.Limiter {
	if bps <= 0 {
		return nil
	}
	burst := min(max(bps/4, 1<<10), 256<<10)
	return rate.NewLimiter(rate.Limit(bps), int(burst))
}

type store struct {
	inner    blob.Store
	slots    chan struct{} // nil: no bound
	up, down *rate.Limiter // nil: no bound
}

func (s *store) Inner() blob.Store { return s.inner }

// acquire takes a slot, or fails with ctx's error.
func (s *store) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.slots == nil {
		return nil
	}
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for a free blob store slot: %w", ctx.Err())
	}
}

func (s *store) release() {
	if s.slots != nil {
		<-s.slots
	}
}

// throttled reads through a rate limiter, failing with ctx's error once ctx
// is done.
type throttled struct {
	ctx context.Context
	r   io.Reader
	lim *rate.Limiter
}

func throttle(ctx context.Context, r io.Reader, lim *rate.Limiter) io.Reader {
	if lim == nil {
		return r
	}
	return &throttled{ctx: ctx, r: r, lim: lim}
}

// Unwrap implements blob.BodyWrapper.
func (t *throttled) Unwrap() io.Reader { return t.r }

func (t *throttled) Read(p []byte) (int, error) {
	if len(p) > t.lim.Burst() {
		p = p[:t.lim.Burst()]
	}
	n, err := t.r.Read(p)
	if n > 0 {
		if werr := wait(t.ctx, t.lim, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}

// wait waits until lim lets n bytes pass, or ctx is done.
func wait(ctx context.Context, lim *rate.Limiter, n int) error {
	r := lim.ReserveN(time.Now(), n)
	d := r.Delay()
	if d == 0 {
		return nil
	}
	if err := layer.Sleep(ctx, d); err != nil {
		r.Cancel()
		return fmt.Errorf("waiting for blob store bandwidth: %w", err)
	}
	return nil
}

func (s *store) write(ctx context.Context, r io.Reader, put func(io.Reader) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	return put(throttle(ctx, r, s.up))
}

func (s *store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, r, func(r io.Reader) error { return s.inner.Put(ctx, key, r, size) })
}

func (s *store) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, r, func(r io.Reader) error { return s.inner.(blob.Creator).Create(ctx, key, r, size) })
}

func (s *store) PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, r, func(r io.Reader) error { return s.inner.(blob.Batcher).PutUnsynced(ctx, key, r, size) })
}

func (s *store) Sync(ctx context.Context) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	return s.inner.(blob.Batcher).Sync(ctx)
}

func (s *store) read(ctx context.Context, fn func(io.Reader) error, get func(func(io.Reader) error) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	return get(func(r io.Reader) error { return fn(throttle(ctx, r, s.down)) })
}

func (s *store) Get(ctx context.Context, key string, fn func(io.Reader) error) error {
	return s.read(ctx, fn, func(fn func(io.Reader) error) error { return s.inner.Get(ctx, key, fn) })
}

func (s *store) GetRange(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	return s.read(ctx, fn, func(fn func(io.Reader) error) error {
		return s.inner.(blob.RangeReader).GetRange(ctx, key, off, n, fn)
	})
}

func (s *store) Stat(ctx context.Context, key string) (blob.Info, error) {
	if err := s.acquire(ctx); err != nil {
		return blob.Info{}, err
	}
	defer s.release()
	return s.inner.Stat(ctx, key)
}

func (s *store) Delete(ctx context.Context, key string) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	return s.inner.Delete(ctx, key)
}

// DeleteBatch takes one slot for the whole batch.
func (s *store) DeleteBatch(ctx context.Context, keys []string) ([]string, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	return blob.DeleteBatch(ctx, s.inner, keys)
}

// relistError says List could not take its slot back after a callback.
type relistError struct{ err error }

func (e *relistError) Error() string { return e.err.Error() }

func (s *store) List(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	held := true
	defer func() {
		if held {
			s.release()
		}
	}()
	err := s.inner.List(ctx, prefix, func(info blob.Info) error {
		s.release()
		held = false
		if err := fn(info); err != nil {
			return err
		}
		if err := s.acquire(ctx); err != nil {
			return &relistError{err}
		}
		held = true
		return nil
	})
	if re := (*relistError)(nil); errors.As(err, &re) {
		return re.err
	}
	return err
}
