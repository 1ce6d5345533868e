// Package blob defines Store, the flat key-value blob store that holds a
// receiver's sealed chunks, envelopes and logs, and the optional abilities a
// store may have (Creator, Batcher, RangeReader).
//
// Invariants every implementation keeps (storage/blob/blobtest checks them):
//
//   - Keys are validated by ValidKey before any I/O; an invalid key fails with
//     ErrInvalidKey and touches nothing.
//   - A blob is replaced atomically: a reader sees the old bytes or the new
//     ones, never a mix, and a Put that fails leaves the old blob (or none).
//   - Put and Create read r until EOF. When size >= 0, r must yield exactly
//     size bytes, else the write fails with ErrSizeMismatch and stores
//     nothing.
//   - Get calls fn exactly once, and only when the blob exists; fn must not
//     keep the reader after it returns.
//   - List calls fn in lexical (byte) order of keys, one call per blob.
//   - Every method checks its context first: a canceled context makes every
//     call fail with an error that matches ctx.Err() under errors.Is.
//   - ErrNotExist matches fs.ErrNotExist, ErrExist matches fs.ErrExist and
//     ErrInvalidKey matches fs.ErrInvalid under errors.Is, so code written
//     against io/fs conventions works unchanged.
//
// Retries, logging and rate limits are wrappers around a Store, never part of
// an implementation.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
)

// Limits of a key.
const (
	// MaxKeyLen is the maximum length of a key in bytes.
	MaxKeyLen = 1024
	// MaxSegmentLen is the maximum length of one "/"-separated segment, the
	// longest file name common file systems accept.
	MaxSegmentLen = 255
)

var (
	// ErrNotExist means the blob does not exist. It matches fs.ErrNotExist.
	ErrNotExist = fmt.Errorf("blob does not exist: %w", fs.ErrNotExist)
	// ErrExist means Create found the key already present. It matches
	// fs.ErrExist.
	ErrExist = fmt.Errorf("blob already exists: %w", fs.ErrExist)
	// ErrInvalidKey means a key or list prefix breaks the rules of ValidKey.
	// It matches fs.ErrInvalid.
	ErrInvalidKey = fmt.Errorf("invalid blob key: %w", fs.ErrInvalid)
	// ErrSizeMismatch means a reader yielded fewer or more bytes than the
	// size given to Put or Create.
	ErrSizeMismatch = errors.New("blob data does not match its declared size")
	// ErrInvalidRange means GetRange was given a negative offset or length.
	ErrInvalidRange = errors.New("invalid blob range")
)

// Store is a flat key-value blob store. Implementations are safe for
// concurrent use by multiple goroutines.
type Store interface {
	// Put stores the bytes of r under key, replacing any blob there
	// atomically. size is the number of bytes r yields, or -1 if unknown.
	// When Put returns nil the blob is durable.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get calls fn once with the blob's bytes and returns fn's error. If the
	// blob does not exist it returns ErrNotExist without calling fn. The
	// reader is valid only until fn returns.
	Get(ctx context.Context, key string, fn func(io.Reader) error) error
	// Stat returns the blob's size and modification time, or ErrNotExist.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the blob. A missing key is ErrNotExist.
	Delete(ctx context.Context, key string) error
	// List calls fn for every blob whose key starts with prefix (a plain
	// string prefix: "a/" matches "a/b" but not "ab/c"), in lexical order of
	// keys. A non-nil error from fn stops the listing and List returns it
	// unchanged. prefix must be "" or a prefix of a valid key, else
	// ErrInvalidKey. Blobs put or deleted during a List may or may not be
	// seen.
	List(ctx context.Context, prefix string, fn func(Info) error) error
}

// Info describes one blob.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Creator is the optional ability to write a key only if it does not exist,
// for envelopes and logs that must never be overwritten. Found by type
// assertion on a Store.
type Creator interface {
	// Create stores r under key like Put, unless a blob exists there: then it
	// returns ErrExist and changes nothing. Of concurrent Creates of one key
	// at most one succeeds.
	Create(ctx context.Context, key string, r io.Reader, size int64) error
}

// Batcher is the optional ability to write many blobs behind one durability
// barrier, for chunk stores that cannot afford a flush per blob. Found by type
// assertion on a Store.
type Batcher interface {
	// PutUnsynced is Put without the durability promise: the blob is
	// visible at once and replaced atomically while the system runs, but
	// until a later Sync returns nil a crash may lose it or leave it with
	// incomplete contents under its key. Callers record a blob as stored
	// only after Sync and must be ready to write it again.
	PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error
	// Sync makes every blob whose PutUnsynced returned before Sync was
	// called durable. If Sync fails, those blobs must be written again.
	Sync(ctx context.Context) error
}

// BatchDeleter is the optional ability to delete many blobs in few
// requests (S3's DeleteObjects), for garbage collection. Found by type
// assertion on a Store; the function DeleteBatch falls back to one Delete
// per key for a store without it.
type BatchDeleter interface {
	// DeleteBatch deletes the blobs of keys, a key with no blob counting
	// as deleted, and returns the keys it knows gone, in the order of
	// keys. With an error, the keys not returned may or may not be gone;
	// a key is never returned that is still there.
	DeleteBatch(ctx context.Context, keys []string) (deleted []string, err error)
}

// DeleteBatch deletes keys as BatchDeleter describes, through s's
// DeleteBatch when it has one, else with one Delete per key, stopping at
// the first that fails.
func DeleteBatch(ctx context.Context, s Store, keys []string) ([]string, error) {
	if b, ok := s.(BatchDeleter); ok {
		return b.DeleteBatch(ctx, keys)
	}
	deleted := make([]string, 0, len(keys))
	for _, k := range keys {
		if err := s.Delete(ctx, k); err != nil && !errors.Is(err, ErrNotExist) {
			return deleted, err
		}
		deleted = append(deleted, k)
	}
	return deleted, nil
}

// Bottom returns the store under every wrapper of s (those with an
// Unwrap method: retry, limit, logged, metered), or s itself.
func Bottom(s Store) Store {
	for {
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			return s
		}
		s = u.Unwrap()
	}
}

// RangeReader is the optional ability to read part of a blob without
// reading the rest, for packs of small chunks served one at a time. Found
// by type assertion on a Store; the function GetRange falls back to Get
// for a store without it.
type RangeReader interface {
	// GetRange is Get limited to the bytes [off, off+n) of the blob: fn's
	// reader yields those bytes, fewer when the blob ends before off+n, and
	// none when off is at or past its end. A negative off or n fails with
	// ErrInvalidRange, a missing blob with ErrNotExist, both without
	// calling fn.
	GetRange(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error
}

// GetRange reads the bytes [off, off+n) of the blob key as RangeReader
// describes, through s's GetRange when it has one, else through a whole
// Get that skips what lies outside the range.
func GetRange(ctx context.Context, s Store, key string, off, n int64, fn func(io.Reader) error) error {
	if err := CheckRange(ctx, key, off, n); err != nil {
		return err
	}
	if rr, ok := s.(RangeReader); ok {
		return rr.GetRange(ctx, key, off, n, fn)
	}
	return s.Get(ctx, key, func(r io.Reader) error {
		if _, err := io.CopyN(io.Discard, r, off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return fn(io.LimitReader(r, n))
	})
}

// CheckRange is the check every RangeReader makes before reading: ctx's
// error, an error wrapping ErrInvalidRange for a negative offset or
// length, or one wrapping ErrInvalidKey; nil if none applies.
func CheckRange(ctx context.Context, key string, off, n int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	if off < 0 || n < 0 {
		return fmt.Errorf("getting blob %q: %w: offset %d, length %d", key, ErrInvalidRange, off, n)
	}
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	return nil
}

// ValidKey reports whether key may name a blob: "/"-separated segments, each
// of 1 to MaxSegmentLen bytes from [a-z0-9._-] and not starting with '.', and
// at most MaxKeyLen bytes in all. It returns nil or an error wrapping
// ErrInvalidKey.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes long, more than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if p := segmentProblem(seg); p != "" {
			return fmt.Errorf("%w: %q: %s", ErrInvalidKey, key, p)
		}
	}
	return nil
}

// ValidPrefix reports whether prefix may be given to List: "" or a prefix of
// some valid key. It returns nil or an error wrapping ErrInvalidKey.
func ValidPrefix(prefix string) error {
	if prefix == "" || ValidKey(prefix) == nil {
		return nil
	}
	if strings.HasSuffix(prefix, "/") && ValidKey(prefix+"x") == nil {
		return nil
	}
	return fmt.Errorf("%w: list prefix %q", ErrInvalidKey, prefix)
}

// ValidSegment reports whether name is a valid segment of a key, the way
// ValidKey checks each one.
func ValidSegment(name string) bool {
	return segmentProblem(name) == ""
}

// segmentProblem returns why seg is not a valid key segment, or "".
func segmentProblem(seg string) string {
	switch {
	case seg == "":
		return "empty segment"
	case len(seg) > MaxSegmentLen:
		return "segment longer than 255 bytes"
	case seg[0] == '.':
		return "segment starts with '.'"
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("byte %q not allowed", c)
		}
	}
	return ""
}

// BodyWrapper is a reader a layer puts around a body it passes on, to count
// or pace it. Unwrap returns the reader it reads from.
type BodyWrapper interface {
	Unwrap() io.Reader
}

// InnermostBody returns the reader under every BodyWrapper around r. A
// store that must read a body before it sends it (S3's checksum) reads
// that one, and then sends r, so that the layers see each byte once, as it
// is sent, paced as it is sent.
func InnermostBody(r io.Reader) io.Reader {
	for {
		w, ok := r.(BodyWrapper)
		if !ok {
			return r
		}
		r = w.Unwrap()
	}
}
