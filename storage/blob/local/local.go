// Package local is a blob.Store in a directory of the local file system.
//
// # Layout
//
// A key is a path below the directory, except that a last segment of at
// least 4 bytes goes into a shard subdirectory named by its first two bytes,
// so that a flat set of chunk IDs does not make one huge directory:
//
//	envelope            -> en/envelope
//	log/abc             -> log/abc
//	data/abcdef         -> data/ab/abcdef
//	data/ab/xyz         -> data/ab/xyz
//
// The mapping is undone by a file's name alone: a file whose name has at
// least 4 bytes is the key of its grandparent directory plus the name; a
// shorter one is the key of its parent plus the name. Because a path cannot
// be both a file and a directory, a key cannot be both a blob and a path
// prefix of another key ("a" and "a/b"), nor a 2-byte last segment equal to
// a shard directory beside it ("d/ab" and "d/abcd"); Put of the second
// fails.
//
// # Invariants
//
//   - Every access goes through an os.Root, so no key (and no symbolic link
//     inside the directory) reaches outside it; keys are validated too.
//   - A blob is written to a temporary file ".tmp-*" in its final directory,
//     fsynced, renamed into place and the directory fsynced, so a reader or a
//     crash sees the old blob or the new one, never part of one. Directories
//     created on the way are fsynced into their parents.
//   - Temporary files are never listed; a crash can leave them behind and
//     Clean removes them.
//   - List, Stat and Get see regular files only; anything else in the
//     directory (names that are not key segments, symbolic links) is ignored.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/sized"
	"lockstep/storage/syncahead"
)

const (
	// shardMin is the length from which a last segment is sharded.
	shardMin = 4
	// shardLen is the length of a shard directory's name.
	shardLen = 2
	// tempPrefix starts the name of every temporary file.
	tempPrefix = ".tmp-"

	fileMode = 0o600
	dirMode  = 0o700
)

// Store is a blob.Store in a directory. It also implements blob.Creator and
// blob.Batcher. Safe for concurrent use, also by several processes sharing
// the directory.
type Store struct {
	root *os.Root

	// wholeFS makes Sync flush the whole file system with one syncfs(2)
	// call; without it Sync fsyncs every path in pending.
	wholeFS bool
	// syncMu runs one Sync at a time: a Sync whose blobs another one took
	// into its flush must not return before that flush ends.
	syncMu   sync.Mutex
	syncHook func()             // tests: runs once a Sync has taken the pending set
	ahead    *syncahead.Flusher // background syncfs as PutUnsynced writes; nil without wholeFS
	mu       sync.Mutex
	pending  map[string]struct{}
	dirs     *handles[*os.Root] // see dir
	kept     *handles[keptFile] // see rangeFile
}

var (
	_ blob.Store       = (*Store)(nil)
	_ blob.Creator     = (*Store)(nil)
	_ blob.Batcher     = (*Store)(nil)
	_ blob.RangeReader = (*Store)(nil)
)

// Open opens the store in dir, creating the directory (mode 0700) if it does
// not exist. Close releases it.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("opening blob directory: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening blob directory: %w", err)
	}
	s := &Store{root: root, wholeFS: haveSyncfs, pending: make(map[string]struct{}), dirs: newHandles[*os.Root](maxCachedDirs), kept: newHandles[keptFile](maxKeptFiles)}
	if s.wholeFS {
		s.ahead = syncahead.New(s.syncfs)
	}
	return s, nil
}

// Close releases the directory. The Store must not be used afterwards.
func (s *Store) Close() error {
	s.ahead.Wait()
	s.kept.close()
	s.dirs.close()
	return s.root.Close()
}

// pathOf returns the path of key's file relative to the store's directory.
func pathOf(key string) string {
	i := strings.LastIndexByte(key, '/')
	last := key[i+1:]
	if len(last) < shardMin {
		return key
	}
	return key[:i+1] + last[:shardLen] + "/" + last
}

// dirOf returns the directory part of a relative path, "." at the top.
func dirOf(p string) string {
	return path.Dir(p)
}

// baseOf returns the last element of a relative path.
func baseOf(p string) string {
	return path.Base(p)
}

// notExist reports whether err means a key's file is missing, including a
// file standing where a directory of its path should be.
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, key string, fn func(io.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	if err := blob.ValidKey(key); err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	p := pathOf(key)
	f, err := s.openBlob(p)
	if notExist(err) || errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("getting blob %q: %w", key, blob.ErrNotExist)
	}
	if err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("getting blob %q: %w", key, blob.ErrNotExist)
	}
	return fn(sized.NewReader(ctx, f, -1))
}

// GetRange implements blob.RangeReader: positioned reads (pread) of the
// blob's file, kept open between calls (see rangeFile).
func (s *Store) GetRange(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	if err := blob.CheckRange(ctx, key, off, n); err != nil {
		return err
	}
	f, done, err := s.rangeFile(pathOf(key))
	if notExist(err) || errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("getting blob %q: %w", key, blob.ErrNotExist)
	}
	if err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	defer done()
	return fn(sized.NewReader(ctx, io.NewSectionReader(f, off, n), -1))
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (blob.Info, error) {
	if err := ctx.Err(); err != nil {
		return blob.Info{}, fmt.Errorf("stat of blob %q: %w", key, err)
	}
	if err := blob.ValidKey(key); err != nil {
		return blob.Info{}, fmt.Errorf("stat of blob %q: %w", key, err)
	}
	fi, err := s.lstatBlob(pathOf(key))
	if err != nil {
		return blob.Info{}, fmt.Errorf("stat of blob %q: %w", key, err)
	}
	return blob.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// lstatBlob returns the FileInfo of a blob's file, or blob.ErrNotExist if
// there is no regular file at p.
func (s *Store) lstatBlob(p string) (fs.FileInfo, error) {
	fi, err := s.root.Lstat(p)
	if notExist(err) || err == nil && !fi.Mode().IsRegular() {
		return nil, blob.ErrNotExist
	}
	return fi, err
}

// Delete implements blob.Store. The removal is durable when Delete returns.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.remove(ctx, key); err != nil {
		return fmt.Errorf("deleting blob %q: %w", key, err)
	}
	return nil
}

func (s *Store) remove(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := blob.ValidKey(key); err != nil {
		return err
	}
	p := pathOf(key)
	if _, err := s.lstatBlob(p); err != nil {
		return err
	}
	err := s.root.Remove(p)
	s.kept.forget(p)
	if err != nil {
		if notExist(err) {
			return blob.ErrNotExist
		}
		return err
	}
	return s.syncDirs([]string{dirOf(p)})
}
