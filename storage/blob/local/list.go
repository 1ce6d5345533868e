package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"lockstep/storage/blob"
)

// itemKind says what an entry of a directory stands for in the key space.
type itemKind int

const (
	// leaf is a blob: a short file, or a long file found in a shard.
	leaf itemKind = iota
	// subtree is a directory taken as a key segment: keys "name/...".
	subtree
	// shard is a 2-byte directory taken as a shard: keys "name??...".
	shard
)

// item is one entry of a directory, ordered by sort, the part of the key it
// contributes ("abc" for a leaf, "ab/" for a subtree, "ab" for a shard).
type item struct {
	kind itemKind
	sort string
	path string // relative to the store's directory
}

// List implements blob.Store. It streams: memory holds one directory's
// entries per level, not the whole listing.
func (s *Store) List(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("listing blobs %q: %w", prefix, err)
	}
	if err := blob.ValidPrefix(prefix); err != nil {
		return fmt.Errorf("listing blobs: %w", err)
	}
	base := prefix[:strings.LastIndexByte(prefix, '/')+1]
	dir := strings.TrimSuffix(base, "/")
	if dir == "" {
		dir = "."
	}
	err := s.listDir(ctx, dir, base, prefix, fn)
	var stop *stopError
	if errors.As(err, &stop) {
		return stop.err
	}
	if err != nil {
		return fmt.Errorf("listing blobs %q: %w", prefix, err)
	}
	return nil
}

// stopError carries an error of List's fn up through the recursion so that
// List returns it unchanged.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

// listDir lists the blobs of dir whose keys start with base (dir's key
// prefix) and match prefix.
func (s *Store) listDir(ctx context.Context, dir, base, prefix string, fn func(blob.Info) error) error {
	items, _, err := s.readItems(dir, "")
	if err != nil {
		return err
	}
	for i := 0; i < len(items); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		it := items[i]
		key := base + it.sort
		if !strings.HasPrefix(key, prefix) && !strings.HasPrefix(prefix, key) {
			continue
		}
		switch it.kind {
		case leaf:
			if !strings.HasPrefix(key, prefix) {
				continue
			}
			fi, err := s.lstatBlob(it.path)
			if errors.Is(err, blob.ErrNotExist) {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			if err := fn(blob.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
				return &stopError{err}
			}
		case subtree:
			if err := s.listDir(ctx, it.path, key, prefix, fn); err != nil {
				return err
			}
		case shard:
			leaves, other, err := s.readItems(it.path, it.sort)
			if err != nil {
				return err
			}
			rest := items[i+1:]
			if !other {
				// Nothing but the shard: skip reading it again as a subtree.
				rest = slices.DeleteFunc(rest, func(x item) bool { return x.kind == subtree && x.path == it.path })
			}
			items = merge(leaves, rest)
			i = -1
		}
	}
	return nil
}

// readItems reads directory dir. With shardName "" it returns the short
// files as leaves, every directory as a subtree and each 2-byte directory
// also as a shard. With a shardName it returns only the shard's leaves: the
// files of at least shardMin bytes that start with shardName, and whether
// the directory holds anything else a subtree would list. Items are sorted;
// a missing directory has none.
func (s *Store) readItems(dir, shardName string) (items []item, other bool, err error) {
	d, err := s.root.Open(dir)
	if notExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if notExist(err) {
		return nil, false, nil // a file where the prefix expects a directory
	}
	if err != nil {
		return nil, false, err
	}
	for _, e := range entries {
		name := e.Name()
		if !blob.ValidSegment(name) {
			continue // temporary and foreign files
		}
		p := path.Join(dir, name)
		switch {
		case shardName != "":
			if e.Type().IsRegular() && len(name) >= shardMin && strings.HasPrefix(name, shardName) {
				items = append(items, item{kind: leaf, sort: name, path: p})
			} else if e.IsDir() || e.Type().IsRegular() && len(name) < shardMin {
				other = true
			}
		case e.Type().IsRegular():
			if len(name) < shardMin {
				items = append(items, item{kind: leaf, sort: name, path: p})
			}
		case e.IsDir():
			items = append(items, item{kind: subtree, sort: name + "/", path: p})
			if len(name) == shardLen {
				items = append(items, item{kind: shard, sort: name, path: p})
			}
		}
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.sort, b.sort) })
	return items, other, nil
}

// merge merges two sorted item lists into a new one.
func merge(a, b []item) []item {
	out := make([]item, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].sort <= b[0].sort {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// Clean removes the temporary files that writes interrupted by a crash left
// behind, if they were last modified before before, and returns how many it
// removed. A process that owns the directory alone calls it at start with
// time.Now(); with other writers active, pass a time far enough back that no
// write still in progress can be that old.
func (s *Store) Clean(ctx context.Context, before time.Time) (int, error) {
	removed := 0
	err := fs.WalkDir(s.root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
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
			return nil
		}
		if err != nil {
			return err
		}
		if !fi.ModTime().Before(before) {
			return nil
		}
		if err := s.root.Remove(p); err != nil && !notExist(err) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("cleaning blob directory: %w", err)
	}
	return removed, nil
}
