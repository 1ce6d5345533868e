// Package mem is a blob.Store held in memory, for tests and for callers that
// need a scratch store.
//
// Invariants: a stored blob's bytes are a private copy that is never changed
// after it is stored (a Put stores a new slice), so readers handed out by Get
// need no lock. Callbacks (Get's and List's fn) run without the store's lock
// held, so they may call the store.
package mem

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/sized"
)

// Store is an in-memory blob.Store. It also implements blob.Creator and
// blob.Batcher (whose Sync does nothing: memory is as durable as it gets).
// The zero value is not usable; call New. Safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	blobs map[string]entry
}

type entry struct {
	data    []byte
	modTime time.Time
}

var (
	_ blob.Store       = (*Store)(nil)
	_ blob.Creator     = (*Store)(nil)
	_ blob.Batcher     = (*Store)(nil)
	_ blob.RangeReader = (*Store)(nil)
)

// New returns an empty Store.
func New() *Store {
	return &Store{blobs: make(map[string]entry)}
}

// Put implements blob.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	data, err := read(ctx, key, r, size)
	if err != nil {
		return fmt.Errorf("putting blob %q: %w", key, err)
	}
	s.mu.Lock()
	s.blobs[key] = entry{data: data, modTime: time.Now()}
	s.mu.Unlock()
	return nil
}

// PutUnsynced implements blob.Batcher; it is Put.
func (s *Store) PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.Put(ctx, key, r, size)
}

// Sync implements blob.Batcher; it only checks ctx.
func (s *Store) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("syncing blobs: %w", err)
	}
	return nil
}

// Create implements blob.Creator.
func (s *Store) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	data, err := read(ctx, key, r, size)
	if err != nil {
		return fmt.Errorf("creating blob %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.blobs[key]; ok {
		return fmt.Errorf("creating blob %q: %w", key, blob.ErrExist)
	}
	s.blobs[key] = entry{data: data, modTime: time.Now()}
	return nil
}

// read validates key and reads all of r into a new slice.
func read(ctx context.Context, key string, r io.Reader, size int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := blob.ValidKey(key); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(size))
	}
	if _, err := buf.ReadFrom(sized.NewReader(ctx, r, size)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, key string, fn func(io.Reader) error) error {
	e, err := s.lookup(ctx, key)
	if err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	return fn(sized.NewReader(ctx, bytes.NewReader(e.data), -1))
}

// GetRange implements blob.RangeReader.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	if err := blob.CheckRange(ctx, key, off, n); err != nil {
		return err
	}
	e, err := s.lookup(ctx, key)
	if err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	return fn(sized.NewReader(ctx, io.NewSectionReader(bytes.NewReader(e.data), off, n), -1))
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (blob.Info, error) {
	e, err := s.lookup(ctx, key)
	if err != nil {
		return blob.Info{}, fmt.Errorf("stat of blob %q: %w", key, err)
	}
	return blob.Info{Key: key, Size: int64(len(e.data)), ModTime: e.modTime}, nil
}

func (s *Store) lookup(ctx context.Context, key string) (entry, error) {
	if err := ctx.Err(); err != nil {
		return entry{}, err
	}
	if err := blob.ValidKey(key); err != nil {
		return entry{}, err
	}
	s.mu.RLock()
	e, ok := s.blobs[key]
	s.mu.RUnlock()
	if !ok {
		return entry{}, blob.ErrNotExist
	}
	return e, nil
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deleting blob %q: %w", key, err)
	}
	if err := blob.ValidKey(key); err != nil {
		return fmt.Errorf("deleting blob %q: %w", key, err)
	}
	s.mu.Lock()
	_, ok := s.blobs[key]
	delete(s.blobs, key)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("deleting blob %q: %w", key, blob.ErrNotExist)
	}
	return nil
}

// List implements blob.Store. It lists a snapshot taken when it starts.
func (s *Store) List(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("listing blobs %q: %w", prefix, err)
	}
	if err := blob.ValidPrefix(prefix); err != nil {
		return fmt.Errorf("listing blobs: %w", err)
	}
	var infos []blob.Info
	s.mu.RLock()
	for k, e := range s.blobs {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, blob.Info{Key: k, Size: int64(len(e.data)), ModTime: e.modTime})
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(infos, func(a, b blob.Info) int { return strings.Compare(a.Key, b.Key) })
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("listing blobs %q: %w", prefix, err)
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}
