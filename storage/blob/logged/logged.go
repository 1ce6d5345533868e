// Package logged is a blob.Store wrapper for debugging that logs every call
// to the store it wraps.
//
// Invariants:
//   - Every call is logged once, when it returns, at slog.LevelDebug with
//     its kind ("put", "create", "put-unsynced", "sync", "get",
//     "get-range", "stat", "delete", "list"), the key (or list prefix), the
//     bytes it moved (read from the caller's reader, or by Get's callback;
//     the number of blobs for List), how long it took and its error, if
//     any.
//   - Nothing is logged, and no counting reader is added, when the logger
//     does not log debug records.
//   - Only keys, sizes, durations and errors are logged, never blob
//     contents; keys and store errors carry no credentials.
//   - The wrapper has exactly the optional abilities (Creator, Batcher,
//     RangeReader) of the store it wraps.
package logged

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/layer"
)

// New returns s wrapped so that every call is logged to log at debug
// level, with the optional abilities of s. A nil log means slog.Default().
func New(s blob.Store, log *slog.Logger) blob.Store {
	if log == nil {
		log = slog.Default()
	}
	return layer.Wrap(&store{inner: s, log: log})
}

type store struct {
	inner blob.Store
	log   *slog.Logger
}

func (s *store) Inner() blob.Store { return s.inner }

func (s *store) on(ctx context.Context) bool { return s.log.Enabled(ctx, slog.LevelDebug) }

// done logs one call that started at start.
func (s *store) done(ctx context.Context, kind, key string, n int64, start time.Time, err error) {
	attrs := []slog.Attr{
		slog.String("kind", kind), slog.String("key", key), slog.Int64("size", n),
		slog.Duration("duration", time.Since(start)),
	}
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "blob store call", attrs...)
}

func (s *store) write(ctx context.Context, kind, key string, r io.Reader, put func(io.Reader) error) error {
	if !s.on(ctx) {
		return put(r)
	}
	start := time.Now()
	cr := layer.Count(r)
	err := put(cr)
	s.done(ctx, kind, key, cr.Count(), start, err)
	return err
}

func (s *store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, "put", key, r, func(r io.Reader) error { return s.inner.Put(ctx, key, r, size) })
}

func (s *store) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, "create", key, r, func(r io.Reader) error {
		return s.inner.(blob.Creator).Create(ctx, key, r, size)
	})
}

func (s *store) PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, "put-unsynced", key, r, func(r io.Reader) error {
		return s.inner.(blob.Batcher).PutUnsynced(ctx, key, r, size)
	})
}

func (s *store) Sync(ctx context.Context) error {
	start := time.Now()
	err := s.inner.(blob.Batcher).Sync(ctx)
	if s.on(ctx) {
		s.done(ctx, "sync", "", 0, start, err)
	}
	return err
}

func (s *store) read(ctx context.Context, kind, key string, fn func(io.Reader) error, get func(func(io.Reader) error) error) error {
	if !s.on(ctx) {
		return get(fn)
	}
	start := time.Now()
	var n int64
	err := get(func(r io.Reader) error {
		cr := layer.Count(r)
		defer func() { n = cr.Count() }()
		return fn(cr)
	})
	s.done(ctx, kind, key, n, start, err)
	return err
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
	start := time.Now()
	info, err := s.inner.Stat(ctx, key)
	if s.on(ctx) {
		s.done(ctx, "stat", key, info.Size, start, err)
	}
	return info, err
}

func (s *store) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := s.inner.Delete(ctx, key)
	if s.on(ctx) {
		s.done(ctx, "delete", key, 0, start, err)
	}
	return err
}

func (s *store) DeleteBatch(ctx context.Context, keys []string) ([]string, error) {
	start := time.Now()
	deleted, err := blob.DeleteBatch(ctx, s.inner, keys)
	if s.on(ctx) {
		s.done(ctx, "delete batch", fmt.Sprintf("%d keys, %d deleted", len(keys), len(deleted)), 0, start, err)
	}
	return deleted, err
}

func (s *store) List(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	if !s.on(ctx) {
		return s.inner.List(ctx, prefix, fn)
	}
	start := time.Now()
	var n int64
	err := s.inner.List(ctx, prefix, func(info blob.Info) error {
		n++
		return fn(info)
	})
	s.done(ctx, "list", prefix, n, start, err)
	return err
}
