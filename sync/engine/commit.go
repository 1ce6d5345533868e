package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
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
// renamed into place, and, after a barrier for the renames, the batch's
// records are stored together.
func (f *folder) finish(ctx context.Context, in <-chan done, fail func(*index.Record, error)) {
	batch := make([]done, 0, finisherBatch)
	for d := range in {
		batch = gather(in, append(batch[:0], d), finisherGather)
		if recs := f.place(batch, fail); len(recs) > 0 {
			f.record(ctx, recs)
		}
	}
}

// gather adds to batch what in holds, then what it brings within window,
// up to finisherBatch items; it returns early when in is closed, so the
// last items of a pull (a single edit's one) never wait. Each batch costs
// two barriers, a transaction here and one on every peer told of it:
// taking only what was queued at once made batches of about a dozen
// items at 100,000 small files, 8,000 of them.
func gather(in <-chan done, batch []done, window time.Duration) []done {
	var timeout <-chan time.Time
	for len(batch) < finisherBatch {
		select {
		case d, ok := <-in:
			if !ok {
				return batch
			}
			batch = append(batch, d)
			continue
		default:
		}
		if timeout == nil {
			t := time.NewTimer(window)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case d, ok := <-in:
			if !ok {
				return batch
			}
			batch = append(batch, d)
		case <-timeout:
			return batch
		}
	}
	return batch
}

// place makes the batch's data durable and renames each item into place;
// it returns the records of those placed.
func (f *folder) place(batch []done, fail func(*index.Record, error)) []index.Record {
	if err := f.fs.Sync(); err != nil {
		for i := range batch {
			f.dropTemp(batch[i].tmp)
			fail(&batch[i].rec, fmt.Errorf("durability barrier: %w", err))
		}
		return nil
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
	return recs
}

// record stores the records of items placed, once their renames are
// durable: a crash in between only costs a rescan.
func (f *folder) record(ctx context.Context, recs []index.Record) {
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
	f.noteChanges(recs, false)
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
//
// A local file is never lost to the replacement: the file in place is
// checked against the local record before, and again after it was swapped
// out atomically (fsys.Root.Exchange), so a write that landed between
// the two is found on the file moved aside, which is then kept as a
// conflict copy.
func (f *folder) commit(d *done) (index.Record, error) {
	r := d.rec
	r.Flags = 0
	if d.tmp == "" {
		return r, nil
	}
	if d.local == nil || d.local.Deleted {
		// Nothing may be there: the rename that refuses to replace is the
		// check, one lookup a new file fewer.
		if hook := f.beforeReplace.Load(); hook != nil {
			(*hook)(r.Name)
		}
		if err := f.fs.RenameNoReplace(d.tmp, r.Name); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return r, errChangedLocally // created meanwhile
			}
			return r, err
		}
		return f.placed(r, d), nil
	}
	cur, err := f.fs.Lstat(r.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r, err
	}
	if !matchesLocal(cur, exists, d.local) {
		return r, errChangedLocally
	}
	// Both changed: the local version lost, and is kept beside the winner
	// under a conflict name that syncs like any file.
	conflict := exists && d.local != nil && !d.local.Deleted && d.local.Version.Compare(r.Version) == index.Concurrent
	if hook := f.beforeReplace.Load(); hook != nil {
		(*hook)(r.Name)
	}
	switch {
	case !exists:
		if err := f.fs.RenameNoReplace(d.tmp, r.Name); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return r, errChangedLocally // created meanwhile
			}
			return r, err
		}
	case cur.IsDir():
		// A directory replaced by a file or symlink: only if it is empty.
		if err := f.fs.Remove(r.Name); err != nil {
			return r, fmt.Errorf("replacing a directory: %w", err)
		}
		if err := f.fs.RenameNoReplace(d.tmp, r.Name); err != nil {
			return r, err
		}
	default:
		if err := f.replace(d, cur, conflict); err != nil {
			return r, err
		}
	}
	return f.placed(r, d), nil
}

// placed is r, put in place from d's temp file, with the file's inode.
func (f *folder) placed(r index.Record, d *done) index.Record {
	// A rename keeps the inode. Had a local write replaced the file
	// since, the next scan finds another inode and reads the file again.
	r.Inode = d.inode
	if r.Inode == 0 {
		if fi, err := f.fs.Lstat(r.Name); err == nil {
			r.Inode = inodeOf(fi)
		}
	}
	return r
}

// replace puts d's temp file in place of the file or symlink there now,
// which matched the local record when looked at (cur). The old entry is
// swapped out first and checked again: changed since, it is a local edit
// that landed meanwhile and is kept as a conflict copy; a conflict keeps
// it too; else it goes to versioning, or away.
func (f *folder) replace(d *done, cur fs.FileInfo, conflict bool) error {
	name := d.rec.Name
	err := f.fs.Exchange(d.tmp, name)
	if errors.Is(err, fsys.ErrNoExchange) {
		return f.replaceByRename(d, cur, conflict)
	}
	if err != nil {
		return err
	}
	old, err := f.fs.Lstat(d.tmp)
	changed := err != nil || !matchesLocal(old, true, d.local)
	switch {
	case changed:
		cname, err := f.keepConflict(d.tmp, name, f.short, time.Now())
		if err != nil {
			return fmt.Errorf("keeping a local change made while %s was replaced: %w", name, err)
		}
		f.log.Warn("a local change landed as the file was replaced; kept it as a conflict copy", "name", name, "copy", cname)
	case conflict:
		if _, err := f.keepConflict(d.tmp, name, d.local.ModifiedBy, time.Now()); err != nil {
			return fmt.Errorf("keeping the conflicting version: %w", err)
		}
	case old.Mode().IsRegular():
		saved, err := f.archivedFrom(d.tmp, name)
		if err != nil {
			return err
		}
		if !saved {
			return f.fs.Remove(d.tmp)
		}
	default:
		return f.fs.Remove(d.tmp)
	}
	return nil
}

// replaceByRename is replace where names can't be swapped atomically: a
// write between the check and the rename is lost there.
func (f *folder) replaceByRename(d *done, cur fs.FileInfo, conflict bool) error {
	name := d.rec.Name
	switch {
	case conflict:
		if _, err := f.keepConflict(name, name, d.local.ModifiedBy, time.Now()); err != nil {
			return fmt.Errorf("keeping the conflicting version: %w", err)
		}
	case cur.Mode().IsRegular():
		// The replaced version goes to versioning, when it is on.
		if _, err := f.archived(name); err != nil {
			return err
		}
	}
	return f.fs.Rename(d.tmp, name)
}

// keepConflict moves src, a version of name that lost to another, to a
// conflict name of name that no file has (never over another conflict
// copy), has it scanned so it syncs, and returns that name.
func (f *folder) keepConflict(src, name string, by crypt.ShortID, now time.Time) (string, error) {
	for n := 1; n <= maxConflictCopies; n++ {
		cname := conflictName(name, by, now, n)
		err := f.fs.RenameNoReplace(src, cname)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		f.log.Info("conflict: kept the local version", "name", name, "copy", cname)
		f.e.opts.Events.Publish(events.ConflictCreated{Folder: f.id, Name: name, ConflictName: cname, Device: by.String()})
		f.requestScan([]string{cname})
		return cname, nil
	}
	return "", fmt.Errorf("more than %d conflict copies of %s in one second: %w", maxConflictCopies, name, fs.ErrExist)
}

// maxConflictCopies bounds the conflict copies of one file in one second.
const maxConflictCopies = 1000

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
		if _, err := f.keepConflict(r.Name, r.Name, l.ModifiedBy, time.Now()); err != nil {
			return err
		}
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

// removeTempsIn removes lockstep's temp and partial files directly in dir,
// which is to be deleted: they are no user's data, and would keep it.
func (f *folder) removeTempsIn(dir string) {
	entries, err := f.fs.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range entries {
		if fsys.IsTemp(de.Name()) {
			if err := f.fs.Remove(path.Join(dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				f.log.Warn("removing a temp file", "name", path.Join(dir, de.Name()), "err", err)
			}
		}
	}
}

// deleteFile removes the file or symlink name, which matched local when
// looked at. It is moved aside first and checked again: a local write
// that landed meanwhile puts it back (or, if the name was taken meanwhile,
// keeps it as a conflict copy) and the deletion waits for a rescan.
func (f *folder) deleteFile(name string, local *index.Record) error {
	aside := tempName(name)
	if err := f.fs.RenameNoReplace(name, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone meanwhile: what the deletion wanted
		}
		return err
	}
	old, err := f.fs.Lstat(aside)
	if err != nil || !matchesLocal(old, true, local) {
		if err := f.fs.RenameNoReplace(aside, name); err != nil {
			if _, cerr := f.keepConflict(aside, name, f.short, time.Now()); cerr != nil {
				return fmt.Errorf("keeping a local change made while %s was deleted: %w", name, cerr)
			}
		}
		return errChangedLocally
	}
	if old.Mode().IsRegular() {
		saved, err := f.archivedFrom(aside, name)
		if err != nil {
			// Never leave it under a temp name, which a restart removes.
			if rerr := f.fs.RenameNoReplace(aside, name); rerr != nil {
				return errors.Join(err, rerr)
			}
			return err
		}
		if saved {
			return nil
		}
	}
	return f.fs.Remove(aside)
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
		local := ptrIf(l, ok)
		if !matchesLocal(cur, true, local) {
			return errChangedLocally
		}
		if hook := f.beforeReplace.Load(); hook != nil {
			(*hook)(r.Name)
		}
		if cur.IsDir() {
			f.removeTempsIn(r.Name) // a partial file of a pull, say: ours
			if err := f.fs.Remove(r.Name); err != nil {
				if errors.Is(err, syscall.ENOTEMPTY) {
					return fmt.Errorf("directory not empty (it holds files that are not synced)")
				}
				return err
			}
		} else if err := f.deleteFile(r.Name, local); err != nil {
			return err
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

// conflictName is name.sync-conflict-YYYYMMDD-HHMMSS-SHORTID.ext for the
// first conflict copy in a second, and ...-SHORTID-N.ext for the N-th.
func conflictName(name string, by crypt.ShortID, t time.Time, n int) string {
	dir, base := path.Split(name)
	ext := path.Ext(base)
	if ext == base {
		ext = "" // ".bashrc" has no extension
	}
	stem := strings.TrimSuffix(base, ext)
	seq := ""
	if n > 1 {
		seq = "-" + strconv.Itoa(n)
	}
	return dir + stem + ".sync-conflict-" + t.Format("20060102-150405") + "-" + by.String() + seq + ext
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
