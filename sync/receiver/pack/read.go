package pack

import (
	"context"
	"fmt"
	"io"

	"lockstep/storage/blob"
)

// ReadIndex reads the entries of the pack stored under key, size bytes
// long (from a List or Stat), with two range reads: the footer, then the
// trailer. Content that is not a pack is ErrInvalid.
func ReadIndex(ctx context.Context, store blob.Store, key string, size int64) ([]Entry, error) {
	if size < int64(FooterSize) {
		return nil, fmt.Errorf("%s: %w: %d bytes", key, ErrInvalid, size)
	}
	footer, err := readRange(ctx, store, key, size-int64(FooterSize), int64(FooterSize))
	if err != nil {
		return nil, err
	}
	n, err := ParseFooter(footer, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	bodies := size - int64(FooterSize) - n
	trailer, err := readRange(ctx, store, key, bodies, n)
	if err != nil {
		return nil, err
	}
	entries, err := ParseTrailer(trailer, bodies)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return entries, nil
}

// readRange reads exactly n bytes at off of the blob key; fewer is
// ErrInvalid (the blob is shorter than its listing said).
func readRange(ctx context.Context, store blob.Store, key string, off, n int64) ([]byte, error) {
	buf := make([]byte, n)
	err := blob.GetRange(ctx, store, key, off, n, func(r io.Reader) error {
		_, err := io.ReadFull(r, buf)
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return fmt.Errorf("%w: %s shorter than listed", ErrInvalid, key)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	return buf, nil
}
