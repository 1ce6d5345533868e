// Package metered is a blob.Store wrapper that counts the calls made to the
// store it wraps and the bytes they move, so that a status page can show
// them and a user can estimate what an S3 provider will bill.
//
// Invariants:
//   - Every call is counted once, under its kind: PUT (Put, Create,
//     PutUnsynced), GET (Get, GetRange), HEAD (Stat), LIST (List) and
//     DELETE (Delete). Sync is not counted: no store of this module makes
//     an S3 request for it.
//   - A call counts as an error when it returns one, except ErrNotExist
//     and ErrExist, which are answers rather than failures, and the error
//     of the caller's own callback (Get's or List's fn), which is no fault
//     of the store.
//   - PUT bytes are the bytes the inner store read from the caller's
//     reader, GET bytes those the callback read; a failed call counts the
//     bytes it moved before failing.
//   - The wrapper has exactly the optional abilities (Creator, Batcher,
//     RangeReader) of the store it wraps.
//   - Counting uses atomics only: the wrapper is safe for concurrent use
//     and adds no lock to a call.
//
// Placed under a retry wrapper it counts every attempt, which is what a
// provider bills; above it, the calls callers made. The counts are of calls
// to the Store, which map to S3 requests only roughly: an S3 Delete also
// sends a HEAD, a blob above s3.PartSize is a multipart upload of several
// requests, and a List reads a page of up to 1000 keys per request.
package metered

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/layer"
)

// Kind is the kind of request a call counts as.
type Kind int

// The kinds of request, named after the HTTP methods of S3.
const (
	Put Kind = iota
	Get
	Head
	List
	Delete
	numKinds
)

// Counts are the totals of one kind of request.
type Counts struct {
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	Bytes    int64 `json:"bytes"`
}

// Snapshot is the state of a Meter at one moment, a plain value to show or
// encode as JSON.
type Snapshot struct {
	Since  time.Time `json:"since"`
	Put    Counts    `json:"put"`
	Get    Counts    `json:"get"`
	Head   Counts    `json:"head"`
	List   Counts    `json:"list"`
	Delete Counts    `json:"delete"`
}

// Meter holds the counts. Safe for concurrent use.
type Meter struct {
	since time.Time
	kinds [numKinds]struct{ requests, errors, bytes atomic.Int64 }
}

// NewMeter returns a Meter with every count zero, started now.
func NewMeter() *Meter { return &Meter{since: time.Now()} }

// Snapshot returns the counts so far. Each field is read atomically; a
// snapshot taken during calls may count a call's request but not yet its
// bytes.
func (m *Meter) Snapshot() Snapshot {
	c := func(k Kind) Counts {
		n := &m.kinds[k]
		return Counts{Requests: n.requests.Load(), Errors: n.errors.Load(), Bytes: n.bytes.Load()}
	}
	return Snapshot{Since: m.since, Put: c(Put), Get: c(Get), Head: c(Head), List: c(List), Delete: c(Delete)}
}

// count records one call of kind k that moved n bytes and returned err.
func (m *Meter) count(k Kind, n int64, err error) {
	c := &m.kinds[k]
	c.requests.Add(1)
	if n > 0 {
		c.bytes.Add(n)
	}
	if err != nil && !errors.Is(err, blob.ErrNotExist) && !errors.Is(err, blob.ErrExist) {
		c.errors.Add(1)
	}
}

// New returns s wrapped so that every call is counted in m, with the
// optional abilities of s.
func New(s blob.Store, m *Meter) blob.Store {
	return layer.Wrap(&store{inner: s, m: m})
}

// Of returns the Meter of the first metered wrapper in a stack of
// storage/blob wrappers starting at s, or nil if there is none.
func Of(s blob.Store) *Meter {
	if st, ok := layer.Find[*store](s); ok {
		return st.m
	}
	return nil
}

type store struct {
	inner blob.Store
	m     *Meter
}

func (s *store) Inner() blob.Store { return s.inner }

func (s *store) write(r io.Reader, put func(io.Reader) error) error {
	cr := layer.Count(r)
	err := put(cr)
	s.m.count(Put, cr.Count(), err)
	return err
}

func (s *store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(r, func(r io.Reader) error { return s.inner.Put(ctx, key, r, size) })
}

func (s *store) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(r, func(r io.Reader) error { return s.inner.(blob.Creator).Create(ctx, key, r, size) })
}

func (s *store) PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(r, func(r io.Reader) error { return s.inner.(blob.Batcher).PutUnsynced(ctx, key, r, size) })
}

func (s *store) Sync(ctx context.Context) error { return s.inner.(blob.Batcher).Sync(ctx) }

func (s *store) read(fn func(io.Reader) error, get func(func(io.Reader) error) error) error {
	var n int64
	var fnErr error
	err := get(func(r io.Reader) error {
		cr := layer.Count(r)
		defer func() { n = cr.Count() }()
		fnErr = fn(cr)
		return fnErr
	})
	s.m.count(Get, n, storeError(err, fnErr))
	return err
}

// storeError returns err unless it is (or wraps) fnErr, the caller's own
// callback error.
func storeError(err, fnErr error) error {
	if fnErr != nil && errors.Is(err, fnErr) {
		return nil
	}
	return err
}

func (s *store) Get(ctx context.Context, key string, fn func(io.Reader) error) error {
	return s.read(fn, func(fn func(io.Reader) error) error { return s.inner.Get(ctx, key, fn) })
}

func (s *store) GetRange(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	return s.read(fn, func(fn func(io.Reader) error) error {
		return s.inner.(blob.RangeReader).GetRange(ctx, key, off, n, fn)
	})
}

func (s *store) Stat(ctx context.Context, key string) (blob.Info, error) {
	info, err := s.inner.Stat(ctx, key)
	s.m.count(Head, 0, err)
	return info, err
}

func (s *store) Delete(ctx context.Context, key string) error {
	err := s.inner.Delete(ctx, key)
	s.m.count(Delete, 0, err)
	return err
}

// DeleteBatch counts a batch the inner store deletes in one go as one
// DELETE request per deleteBatchSize keys (S3's DeleteObjects), and one
// per key otherwise.
func (s *store) DeleteBatch(ctx context.Context, keys []string) ([]string, error) {
	deleted, err := blob.DeleteBatch(ctx, s.inner, keys)
	// The store at the bottom decides: the layers between show
	// DeleteBatch over any store, deleting key by key when it lacks one.
	requests := len(deleted)
	if err != nil {
		requests++ // the one that failed
	}
	if _, ok := blob.Bottom(s.inner).(blob.BatchDeleter); ok {
		requests = (len(keys) + deleteBatchSize - 1) / deleteBatchSize
	}
	for i := range requests {
		var e error
		if i == requests-1 {
			e = err
		}
		s.m.count(Delete, 0, e)
	}
	return deleted, err
}

// deleteBatchSize is how many keys one S3 DeleteObjects request takes.
const deleteBatchSize = 1000

func (s *store) List(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	var fnErr error
	err := s.inner.List(ctx, prefix, func(info blob.Info) error {
		fnErr = fn(info)
		return fnErr
	})
	s.m.count(List, 0, storeError(err, fnErr))
	return err
}
