// Package retry is a blob.Store wrapper that retries calls failing with
// transient errors, with exponential backoff and full jitter.
//
// Invariants:
//   - A call is attempted at most Options.Attempts times. Before attempt
//     n+1 it sleeps a random duration in [0, min(MaxDelay,
//     BaseDelay*2^(n-1))] ("full jitter"), and gives up as soon as its
//     context is done, with an error matching the context's error.
//   - Only errors the classifier (Options.Transient) calls transient are
//     retried; never a context's error, nor ErrNotExist, ErrExist,
//     ErrInvalidKey, ErrSizeMismatch or ErrInvalidRange, whatever the
//     classifier says. The last error is returned unchanged.
//   - Each retry is logged once at Warn with the call's kind, key, the
//     attempt that failed, the delay and the error; never blob contents.
//   - Put, Create and PutUnsynced are retried only if the caller's data
//     can be read again: r is an io.Seeker (then it is sought back to where
//     it was), or the attempt that failed read at most Options.Buffer bytes
//     of it (which were kept, and are replayed before reading on). A
//     failure of r itself is never retried. Each attempt gets its own
//     reader, which fails once the attempt is over, so a transport still
//     reading an abandoned request body cannot consume the next attempt's
//     data.
//   - Create retried after a transient failure may meet ErrExist for its
//     own earlier attempt, which the server applied though the answer was
//     lost. It then reads the blob back: if it holds exactly the caller's
//     data, Create returns nil, else ErrExist. (Another writer's Create of
//     the very same bytes is indistinguishable from our own and harmless.)
//   - Delete retried after a transient failure may report ErrNotExist for
//     a blob its own earlier attempt removed; the blob is gone either way.
//   - Get and GetRange are retried only if fn has not been called: Get
//     calls fn once, and fn may have consumed part of the blob. A blob
//     whose transfer breaks mid-way fails with the transport's error.
//   - List is retried after a failure mid-listing by listing again and
//     skipping keys up to the last one fn was given (List is in lexical
//     order), so fn still sees each blob at most once. An error from fn is
//     never retried.
//   - The wrapper has exactly the optional abilities (Creator, Batcher,
//     RangeReader) of the store it wraps.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/layer"
	"lockstep/storage/blob/internal/netfail"
)

// Defaults for zero Options fields.
const (
	DefaultAttempts  = 5
	DefaultBaseDelay = 200 * time.Millisecond
	DefaultMaxDelay  = 15 * time.Second
	DefaultBuffer    = 1 << 20
)

// Options configure the retries. Zero fields take the defaults.
type Options struct {
	// Attempts is the most attempts of one call, the first included; 1
	// means no retries.
	Attempts int
	// BaseDelay bounds the first delay; each later one's bound doubles, up
	// to MaxDelay.
	BaseDelay, MaxDelay time.Duration
	// Transient reports whether an error may pass if the call is made
	// again. Default: NetTransient. Stores provide their own, such as
	// s3.Transient.
	Transient func(error) bool
	// Buffer is the most bytes of a reader that is not an io.Seeker kept
	// in memory to replay it for a retry; a negative value keeps none.
	Buffer int64
	// Logger receives a record for each retry. Default: slog.Default().
	Logger *slog.Logger
}

// NetTransient is the default classifier: timeouts, reset or refused
// connections and connections closed mid-response.
func NetTransient(err error) bool { return netfail.Transient(err) }

// New returns s wrapped with retries as o says, with the optional
// abilities of s.
func New(s blob.Store, o Options) blob.Store {
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = DefaultBaseDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.MaxDelay < o.BaseDelay {
		o.MaxDelay = o.BaseDelay
	}
	if o.Transient == nil {
		o.Transient = NetTransient
	}
	if o.Buffer == 0 {
		o.Buffer = DefaultBuffer
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return layer.Wrap(&store{inner: s, o: o})
}

type store struct {
	inner blob.Store
	o     Options
}

func (s *store) Inner() blob.Store { return s.inner }

// permanent are the errors never retried, whatever the classifier says.
var permanent = []error{
	context.Canceled, context.DeadlineExceeded,
	blob.ErrNotExist, blob.ErrExist, blob.ErrInvalidKey, blob.ErrSizeMismatch, blob.ErrInvalidRange,
}

// transient reports whether err, returned under ctx, is worth retrying.
func (s *store) transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	for _, p := range permanent {
		if errors.Is(err, p) {
			return false
		}
	}
	return s.o.Transient(err)
}

// final marks an error an attempt returns that must not be retried.
type final struct{ err error }

func (f final) Error() string { return f.err.Error() }

// delay returns the sleep before the attempt after attempt n (n >= 1).
func (s *store) delay(n int) time.Duration {
	bound := s.o.BaseDelay
	for i := 1; i < n && bound < s.o.MaxDelay; i++ {
		bound *= 2
	}
	bound = min(bound, s.o.MaxDelay)
	return time.Duration(rand.Int64N(int64(bound) + 1))
}

// do runs op until it succeeds, fails for good, or runs out of attempts.
// op returns final{err} for an error that must not be retried.
func (s *store) do(ctx context.Context, kind, key string, op func(attempt int) error) error {
	for attempt := 1; ; attempt++ {
		err := op(attempt)
		f, isFinal := err.(final)
		if isFinal {
			err = f.err
		}
		if cerr := ctx.Err(); cerr != nil && err != nil && !errors.Is(err, cerr) {
			return fmt.Errorf("%w (%w)", cerr, err)
		}
		if isFinal || attempt >= s.o.Attempts || !s.transient(ctx, err) {
			return err
		}
		d := s.delay(attempt)
		s.o.Logger.LogAttrs(ctx, slog.LevelWarn, "blob store call failed, retrying",
			slog.String("kind", kind), slog.String("key", key), slog.Int("attempt", attempt),
			slog.Int("attempts", s.o.Attempts), slog.Duration("delay", d), slog.Any("err", err))
		if serr := layer.Sleep(ctx, d); serr != nil {
			return fmt.Errorf("%w (while waiting to retry after: %w)", serr, err)
		}
	}
}

// write runs put with a replayable view of r, retrying while r can be
// replayed.
func (s *store) write(ctx context.Context, kind, key string, r io.Reader, put func(io.Reader) error) error {
	b := newBody(r, s.o.Buffer)
	defer b.close()
	return s.do(ctx, kind, key, func(attempt int) error {
		ar, ok := b.attempt()
		if !ok {
			return final{fmt.Errorf("%s blob %q: cannot replay its data for a retry", kind, key)}
		}
		err := put(ar)
		if err != nil && !b.replayable() {
			return final{err}
		}
		return err
	})
}

func (s *store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, "put", key, r, func(r io.Reader) error { return s.inner.Put(ctx, key, r, size) })
}

func (s *store) PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, "put-unsynced", key, r, func(r io.Reader) error {
		return s.inner.(blob.Batcher).PutUnsynced(ctx, key, r, size)
	})
}

func (s *store) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	c := s.inner.(blob.Creator)
	b := newBody(r, s.o.Buffer)
	defer b.close()
	ambiguous := false // an earlier attempt may have created the blob
	return s.do(ctx, "create", key, func(attempt int) error {
		ar, ok := b.attempt()
		if !ok {
			return final{fmt.Errorf("creating blob %q: cannot replay its data for a retry", key)}
		}
		err := c.Create(ctx, key, ar, size)
		switch {
		case err == nil:
			return nil
		case ambiguous && errors.Is(err, blob.ErrExist):
			same, serr := s.holds(ctx, key, b)
			if serr != nil && s.transient(ctx, serr) {
				return serr // try the Create, and the check, again
			}
			if same {
				return nil
			}
			return final{err}
		case !b.replayable():
			return final{err}
		}
		if s.transient(ctx, err) {
			ambiguous = true
		}
		return err
	})
}

// holds reports whether the blob key holds exactly the bytes of b, reading
// it with retries of its own.
func (s *store) holds(ctx context.Context, key string, b *body) (bool, error) {
	ar, ok := b.attempt()
	if !ok {
		return false, nil
	}
	same := false
	err := s.read(ctx, "get", key, func(r io.Reader) error {
		var err error
		same, err = equal(r, ar)
		return err
	}, func(fn func(io.Reader) error) error { return s.inner.Get(ctx, key, fn) })
	return same, err
}

// equal reports whether a and b yield the same bytes.
func equal(a, b io.Reader) (bool, error) {
	ba, bb := make([]byte, 32<<10), make([]byte, 32<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if ea != nil && ea != io.EOF && ea != io.ErrUnexpectedEOF {
			return false, ea
		}
		if eb != nil && eb != io.EOF && eb != io.ErrUnexpectedEOF {
			return false, eb
		}
		if na != nb || string(ba[:na]) != string(bb[:nb]) {
			return false, nil
		}
		if ea != nil || eb != nil {
			return ea != nil && eb != nil, nil
		}
	}
}

func (s *store) Sync(ctx context.Context) error {
	return s.do(ctx, "sync", "", func(int) error { return s.inner.(blob.Batcher).Sync(ctx) })
}

// read runs get until it succeeds, fails for good, or has called fn.
func (s *store) read(ctx context.Context, kind, key string, fn func(io.Reader) error, get func(func(io.Reader) error) error) error {
	called := false
	return s.do(ctx, kind, key, func(int) error {
		err := get(func(r io.Reader) error {
			called = true
			return fn(r)
		})
		if called {
			return final{err}
		}
		return err
	})
}

func (s *store) Get(ctx context.Context, key string, fn func(io.Reader) error) error {
	return s.read(ctx, "get", key, fn, func(fn func(io.Reader) error) error { return s.inner.Get(ctx, key, fn) })
}

func (s *store) GetRange(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	return s.read(ctx, "get-range", key, fn, func(fn func(io.Reader) error) error {
		return s.inner.(blob.RangeReader).GetRange(ctx, key, off, n, fn)
	})
}

func (s *store) Stat(ctx context.Context, key string) (blob.Info, error) {
	var info blob.Info
	err := s.do(ctx, "stat", key, func(int) error {
		var err error
		info, err = s.inner.Stat(ctx, key)
		return err
	})
	return info, err
}

func (s *store) Delete(ctx context.Context, key string) error {
	return s.do(ctx, "delete", key, func(int) error { return s.inner.Delete(ctx, key) })
}

// DeleteBatch retries the keys not yet deleted.
func (s *store) DeleteBatch(ctx context.Context, keys []string) ([]string, error) {
	var deleted []string
	left := keys
	err := s.do(ctx, "delete batch", fmt.Sprintf("%d keys", len(keys)), func(int) error {
		gone, err := blob.DeleteBatch(ctx, s.inner, left)
		deleted = append(deleted, gone...)
		left = without(left, gone)
		return err
	})
	return inOrder(keys, deleted), err
}

// without returns keys less those in gone (both in keys' order).
func without(keys, gone []string) []string {
	g := make(map[string]bool, len(gone))
	for _, k := range gone {
		g[k] = true
	}
	var out []string
	for _, k := range keys {
		if !g[k] {
			out = append(out, k)
		}
	}
	return out
}

// inOrder returns the keys of keys that are in set, in keys' order.
func inOrder(keys, set []string) []string {
	return without(keys, without(keys, set))
}

func (s *store) List(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	var last string // the last key given to fn
	given := false
	return s.do(ctx, "list", prefix, func(int) error {
		var fnErr error
		err := s.inner.List(ctx, prefix, func(info blob.Info) error {
			if given && info.Key <= last {
				return nil // given to fn by an earlier attempt
			}
			if fnErr = fn(info); fnErr != nil {
				return fnErr
			}
			last, given = info.Key, true
			return nil
		})
		if fnErr != nil {
			return final{err}
		}
		return err
	})
}
