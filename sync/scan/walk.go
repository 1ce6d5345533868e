package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// walker lists the folder in name order and merges the listing with the
// known records: a known record the listing passes by is a deletion.
type walker struct {
	ctx    context.Context
	fs     FS
	known  Known
	ignore *Matcher
	jobs   chan<- hashJob
	out    outbox
	ks     *knownStream // records of the scope being walked

	beforeHashing func() error // Options.BeforeHashing, until called
}

// kind is what the walker makes of one directory entry.
type kind uint8

const (
	kAbsent  kind = iota // vanished: known records there are deletions
	kFile                // regular file
	kDir                 // directory: descend
	kSymlink             // symlink: record its target
	kHold                // ignored: known records there are left alone
	kSkip                // unusable (reported): known records there are left alone
)

// item is one step of a directory's merge, ordered by key: an entry (key
// is its base name) or the subtree of one (key is base name + "/"), so
// that visiting items in key order visits full names in byte order.
type item struct {
	key  string
	name string
	fi   fs.FileInfo
	kind kind
	sub  bool // the subtree of name, not name itself
}

// hashJob is a file to read and hash; known is its previous record, if any.
type hashJob struct {
	name  string
	known *index.Record
}

func (w *walker) walk(scopes []string) error {
	for _, p := range scopes {
		if err := w.scope(p); err != nil {
			return err
		}
	}
	return nil
}

// scope walks one subtree p ("" for the whole folder): p itself, compared
// with known.Local(p), then what is under it, merged with the known
// records under it.
func (w *walker) scope(p string) error {
	if p == "" {
		w.ks = openKnown(w.known, "")
		defer w.ks.close()
		return w.dir("")
	}
	if err := fsys.ValidName(p); err != nil {
		return w.out.skip(p, err)
	}
	k, fi, err := w.leaf(p)
	if err != nil || k == kHold || k == kSkip {
		return err
	}
	var known *index.Record
	if r, ok := w.known.Local(p); ok && !r.Deleted {
		known = &r
	}
	w.ks = openKnown(w.known, p)
	defer w.ks.close()
	if k == kAbsent {
		if known != nil {
			if err := w.deleted(known); err != nil {
				return err
			}
		}
		return w.drain(p, true)
	}
	if err := w.visit(p, fi, k, known); err != nil {
		return err
	}
	if k == kDir {
		return w.dir(p)
	}
	return w.drain(p, true)
}

// leaf classifies the scope path p. Its parents must all be real,
// non-ignored directories: otherwise p is absent (a parent is gone, or is
// a symlink or file, so p is not part of the folder), or out of scope.
func (w *walker) leaf(p string) (kind, fs.FileInfo, error) {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		parent := p[:i]
		fi, err := w.fs.Lstat(parent)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return kAbsent, nil, nil
		case err != nil:
			return kSkip, nil, w.out.skip(parent, err)
		case !fi.IsDir():
			return kAbsent, nil, nil
		case w.ignore.matchOne(parent, true):
			return kHold, nil, nil
		}
	}
	fi, err := w.fs.Lstat(p)
	k, why := w.classify(p, fi, err)
	if k == kSkip {
		return k, nil, w.out.skip(p, why)
	}
	return k, fi, nil
}

// classify decides what to do with the entry name, described by fi or
// failing with err. For kSkip it returns the reason.
func (w *walker) classify(name string, fi fs.FileInfo, err error) (kind, error) {
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return kAbsent, nil
		}
		return kSkip, err
	}
	mode := fi.Mode()
	if w.ignore.matchOne(name, mode.IsDir()) {
		return kHold, nil
	}
	if err := fsys.ValidName(name); err != nil {
		return kSkip, err
	}
	switch {
	case mode.IsDir():
		return kDir, nil
	case mode&fs.ModeSymlink != 0:
		return kSymlink, nil
	case mode.IsRegular():
		return kFile, nil
	}
	return kSkip, fmt.Errorf("%w: %v", ErrSpecial, mode.Type())
}

// dir walks the directory d ("" for the folder root) and everything under
// it, consuming the known records under d.
func (w *walker) dir(d string) error {
	entries, err := w.fs.ReadDir(dotIfRoot(d))
	if err != nil {
		if d == "" {
			return fmt.Errorf("scan: listing folder: %w", err)
		}
		if err := w.out.skip(d, err); err != nil {
			return err
		}
		return w.drain(d, false)
	}
	items := make([]item, 0, len(entries)+len(entries)/4)
	for _, e := range entries {
		name := path.Join(d, e.Name())
		fi, err := e.Info()
		k, why := w.classify(name, fi, err)
		switch k {
		case kAbsent:
			continue
		case kSkip:
			if err := w.out.skip(name, why); err != nil {
				return err
			}
		}
		items = append(items, item{key: e.Name(), name: name, fi: fi, kind: k})
		if k != kFile && k != kSymlink {
			items = append(items, item{key: e.Name() + "/", name: name, kind: k, sub: true})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.key, b.key) })
	for _, it := range items {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if err := w.step(it); err != nil {
			return err
		}
	}
	return w.drain(d, true)
}

// step merges one item with the known records.
func (w *walker) step(it item) error {
	if it.sub {
		if err := w.advance(it.name + "/"); err != nil {
			return err
		}
		if it.kind == kDir {
			return w.dir(it.name)
		}
		return w.drain(it.name, false)
	}
	if err := w.advance(it.name); err != nil {
		return err
	}
	var known *index.Record
	r, err := w.ks.head()
	if err != nil {
		return err
	}
	if r != nil && r.Name == it.name {
		w.ks.pop()
		rec := *r
		known = &rec
	}
	if it.kind == kHold || it.kind == kSkip {
		return nil // whatever was known there is left alone
	}
	return w.visit(it.name, it.fi, it.kind, known)
}

// advance reports as deleted every known record before name: the walk has
// passed them without meeting them.
func (w *walker) advance(name string) error {
	for {
		r, err := w.ks.head()
		if err != nil || r == nil || r.Name >= name {
			return err
		}
		rec := *r
		w.ks.pop()
		if err := w.deleted(&rec); err != nil {
			return err
		}
	}
}

// drain consumes the known records under dir ("" for all), reporting them
// as deleted when del is set and leaving them alone otherwise.
func (w *walker) drain(dir string, del bool) error {
	if dir != "" {
		if err := w.advance(dir + "/"); err != nil {
			return err
		}
	}
	for {
		r, err := w.ks.head()
		if err != nil || r == nil || !isUnder(r.Name, dir) {
			return err
		}
		rec := *r
		w.ks.pop()
		if del {
			if err := w.deleted(&rec); err != nil {
				return err
			}
		}
	}
}

// deleted reports known as deleted, unless its name is ignored.
func (w *walker) deleted(known *index.Record) error {
	if w.ignore.Match(known.Name, known.Type == index.Dir) {
		return nil
	}
	return w.out.record(deletion(known))
}

func deletion(known *index.Record) index.Record {
	return index.Record{Name: known.Name, Type: known.Type, Mode: known.Mode, ModTime: known.ModTime, Deleted: true}
}

// visit compares an existing entry with its known record and reports it or
// queues it for hashing when it changed.
func (w *walker) visit(name string, fi fs.FileInfo, k kind, known *index.Record) error {
	rec := index.Record{
		Name:    name,
		Mode:    uint32(fi.Mode().Perm()),
		ModTime: fi.ModTime().UnixNano(),
		Inode:   inodeOf(fi),
	}
	switch k {
	case kDir:
		rec.Type = index.Dir
		if known != nil && known.Type == index.Dir && known.Mode == rec.Mode {
			return nil
		}
	case kSymlink:
		target, err := w.fs.Readlink(name)
		if err != nil {
			return w.out.skip(name, err)
		}
		rec.Type, rec.Target = index.Symlink, target
		if known != nil && known.Type == index.Symlink && known.Target == target {
			return nil
		}
	case kFile:
		rec.Type, rec.Size = index.File, fi.Size()
		if known == nil || known.Type != index.File || known.Size != rec.Size ||
			known.ModTime != rec.ModTime || !sameInode(known.Inode, rec.Inode) {
			if w.beforeHashing != nil {
				if err := w.beforeHashing(); err != nil {
					return err
				}
				w.beforeHashing = nil
			}
			select {
			case w.jobs <- hashJob{name: name, known: known}:
				return nil
			case <-w.ctx.Done():
				return w.ctx.Err()
			}
		}
		if known.Mode == rec.Mode {
			return nil
		}
		rec.Blocks = known.Blocks // metadata only: the content is unchanged
	}
	return w.out.record(rec)
}

// sameInode compares inode numbers, 0 meaning unknown.
func sameInode(a, b uint64) bool {
	return a == 0 || b == 0 || a == b
}

func dotIfRoot(d string) string {
	if d == "" {
		return "."
	}
	return d
}
