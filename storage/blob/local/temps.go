package local

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	"lockstep/storage/blob"
)

// Temps calls fn, in no particular order, for every temporary file
// (".tmp-*") a write left in the directories of the keys that start with
// prefix, which must be "" or end in "/": a write in progress, or one a
// crash interrupted (Clean removes those). Info.Key is the file's
// slash-separated path in the store's directory, not a key. A non-nil
// error from fn stops the walk and Temps returns it unchanged.
func (s *Store) Temps(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("listing temporary files %q: %w", prefix, err)
	}
	if prefix != "" && (!strings.HasSuffix(prefix, "/") || blob.ValidPrefix(prefix) != nil) {
		return fmt.Errorf("listing temporary files %q: %w", prefix, blob.ErrInvalidKey)
	}
	dir := strings.TrimSuffix(prefix, "/")
	if dir == "" {
		dir = "."
	}
	var stop *stopError
	err := fs.WalkDir(s.root.FS(), dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if notExist(err) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), tempPrefix) {
			return nil
		}
		fi, err := s.root.Lstat(p)
		if notExist(err) {
			return nil // renamed into place meanwhile
		}
		if err != nil {
			return err
		}
		if err := fn(blob.Info{Key: p, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
			stop = &stopError{err}
			return stop
		}
		return nil
	})
	if stop != nil {
		return stop.err
	}
	if err != nil {
		return fmt.Errorf("listing temporary files %q: %w", prefix, err)
	}
	return nil
}
