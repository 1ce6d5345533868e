package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"time"

	"lockstep/crypt"
	"lockstep/sync/events"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// finish commits pulled items in batches: one durability barrier for the
// batch's data, then each item is checked against the local file and
// renamed into place, and the batch's records are stored together.
func (f *folder) finish(ctx context.Context, in <-chan done, fail func(*index.Record, error)) {
	batch := make([]done, 0, finisherBatch)
	for d := range in {
		batch = append(batch[:0], d)
	drain:
		for len(batch) < finisherBatch {
			select {
			case d, ok := <-in:
				if !ok {
					break drain
				}
				batch = append(batch, d)
			default:
				break drain
			}
		}
		f.commitBatch(ctx, batch, fail)
	}
}

func (f *folder) commitBatch(ctx context.Context, batch []done, fail func(*index.Record, error)) {
	if err := f.fs.Sync(); err != nil {
		for i := range batch {
			f.dropTemp(batch[i].tmp)
			fail(&batch[i].rec, fmt.Errorf("durability barrier: %w", err))
		}
		return
	}
	recs := make([]index.Record, 0, len(batch))
	for i := range batch {
		d := &batch[i]
		r, err := f.commit(d)
		if err != nil {
			f.dropTemp(d.tmp)
			fail(&d.rec, err)
			continue
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return
	}
	// The renames are durable before the index says so; a crash in between
	// only costs a rescan.
	if err := f.fs.Sync(); err != nil {
		f.log.Warn("durability barrier after renames", "err", err)
	}
	if _, err := f.set.UpdateLocal(ctx, recs); err != nil {
		f.log.Error("recording pulled files", "err", err)
		return
	}
	f.mu.Lock()
	f.lastPulled = time.Now()
	f.mu.Unlock()
	f.notifyIndex()
	for i := range recs {
		f.e.opts.Events.Publish(events.ItemFinished{Folder: f.id, Name: recs[i].Name, Action: events.ActionUpdate})
	}
}

func (f *folder) dropTemp(tmp string) {
	if tmp != "" {
		f.fs.Remove(tmp)
	}
}

// commit puts one pulled item in place and returns its new local record.
func (f *folder) commit(d *done) (index.Record, error) {
	r := d.rec
	r.Flags = 0
	if d.tmp == "" {
		return r, nil
	}
	cur, err := f.fs.Lstat(r.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r, err
	}
	if !matchesLocal(cur, exists, d.local) {
		return r, errChangedLocally
	}
	if exists && d.local != nil && !d.local.Deleted && d.local.Version.Compare(r.Version) == index.Concurrent {
		// Both changed: the local version lost, and is kept beside the
		// winner under a conflict name that syncs like any file.
		cname := conflictName(r.Name, d.local.ModifiedBy, time.Now())
		if err := f.fs.Rename(r.Name, cname); err != nil {
			return r, fmt.Errorf("keeping the conflicting version: %w", err)
		}
		f.log.Info("conflict: kept the local version", "name", r.Name, "copy", cname)
		f.e.opts.Events.Publish(events.ConflictCreated{Folder: f.id, Name: r.Name, ConflictName: cname, Device: d.local.ModifiedBy.String()})
		f.requestScan([]string{cname})
	} else if exists && cur.IsDir() {
		// A directory replaced by a file or symlink: only if it is empty.
		if err := f.fs.Remove(r.Name); err != nil {
			return r, fmt.Errorf("replacing a directory: %w", err)
		}
	} else if exists && cur.Mode().IsRegular() {
		// The replaced version goes to versioning, when it is on.
		if _, err := f.archived(r.Name); err != nil {
			return r, err
		}
	}
	if err := f.fs.Rename(d.tmp, r.Name); err != nil {
		return r, err
	}
	if fi, err := f.fs.Lstat(r.Name); err == nil {
		r.Inode = inodeOf(fi)
	}
	return r, nil
}

// matchesLocal reports whether the file on disk (cur, if exists) is what
// the local record says, so replacing it loses nothing that was not
// scanned.
func matchesLocal(cur fs.FileInfo, exists bool, local *index.Record) bool {
	if local == nil || local.Deleted {
		return !exists
	}
	if !exists {
		// Deleted locally and not yet scanned: writing the file back is
		// what the deletion's rescan would resolve anyway, but do not
		// guess; rescan first.
		return false
	}
	switch local.Type {
	case index.Dir:
		return cur.IsDir()
	case index.Symlink:
		return cur.Mode()&fs.ModeSymlink != 0
	}
	if !cur.Mode().IsRegular() || cur.Size() != local.Size || cur.ModTime().UnixNano() != local.ModTime {
		return false
	}
	return local.Inode == 0 || inodeOf(cur) == 0 || inodeOf(cur) == local.Inode
}

// pullDir creates or updates a directory.
func (f *folder) pullDir(ctx context.Context, r *index.Record) error {
	cur, err := f.fs.Lstat(r.Name)
	switch {
	case err == nil && !cur.IsDir():
		l, ok := f.set.Local(r.Name)
		if !matchesLocal(cur, true, ptrIf(l, ok)) {
			return errChangedLocally
		}
		// A file or symlink became a directory: keep the old entry.
		cname := conflictName(r.Name, l.ModifiedBy, time.Now())
		if err := f.fs.Rename(r.Name, cname); err != nil {
			return err
		}
		f.e.opts.Events.Publish(events.ConflictCreated{Folder: f.id, Name: r.Name, ConflictName: cname, Device: l.ModifiedBy.String()})
		f.requestScan([]string{cname})
		fallthrough
	case errors.Is(err, fs.ErrNotExist):
		if err := f.fs.MkdirAll(r.Name, 0o755); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	// Owner access stays, or nothing could be synced into it.
	if err := f.fs.Chmod(r.Name, fs.FileMode(r.Mode&0o777|0o700)); err != nil {
		return err
	}
	rec := *r
	rec.Flags = 0
	if fi, err := f.fs.Lstat(r.Name); err == nil {
		rec.Inode = inodeOf(fi)
	}
	if _, err := f.set.UpdateLocal(ctx, []index.Record{rec}); err != nil {
		return err
	}
	f.notifyIndex()
	return nil
}

// pullDelete removes a file, symlink or empty directory that peers deleted.
func (f *folder) pullDelete(ctx context.Context, r *index.Record) error {
	l, ok := f.set.Local(r.Name)
	cur, err := f.fs.Lstat(r.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if exists {
		if !matchesLocal(cur, true, ptrIf(l, ok)) {
			return errChangedLocally
		}
		saved := false
		if cur.Mode().IsRegular() {
			var err error
			if saved, err = f.archived(r.Name); err != nil {
				return err
			}
		}
		if !saved { // not moved into the archive: remove it
			if err := f.fs.Remove(r.Name); err != nil {
				if cur.IsDir() && errors.Is(err, syscall.ENOTEMPTY) {
					return fmt.Errorf("directory not empty (it holds files that are not synced)")
				}
				return err
			}
		}
	}
	rec := *r
	rec.Flags = 0
	if _, err := f.set.UpdateLocal(ctx, []index.Record{rec}); err != nil {
		return err
	}
	f.notifyIndex()
	return nil
}

func ptrIf(r index.Record, ok bool) *index.Record {
	if !ok {
		return nil
	}
	return &r
}

// conflictName is name.sync-conflict-YYYYMMDD-HHMMSS-SHORTID.ext.
func conflictName(name string, by crypt.ShortID, t time.Time) string {
	dir, base := path.Split(name)
	ext := path.Ext(base)
	if ext == base {
		ext = "" // ".bashrc" has no extension
	}
	stem := strings.TrimSuffix(base, ext)
	return dir + stem + ".sync-conflict-" + t.Format("20060102-150405") + "-" + by.String() + ext
}

// tempName is a fresh temp name beside name.
func tempName(name string) string {
	var b [8]byte
	rand.Read(b[:])
	dir := path.Dir(name)
	tmp := fsys.TempPrefix + hex.EncodeToString(b[:])
	if dir == "." {
		return tmp
	}
	return dir + "/" + tmp
}

func unixNano(ns int64) time.Time { return time.Unix(0, ns) }

func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

func fromWireName(name string) (string, error) {
	return name, fsys.ValidName(name)
}
