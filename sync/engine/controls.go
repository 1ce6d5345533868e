package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/scan"
)

// What the console and the CLI show and change of a folder day to day:
// what it still needs and why, what changed recently and who changed
// it, and its ignore patterns.

// ErrPaused means the folder is paused: it does not run, so it cannot
// scan, and what it needs is not worked out.
var ErrPaused = errors.New("the folder is paused")

// ScanAll asks every running folder for an immediate full rescan.
func (e *Engine) ScanAll() {
	for _, f := range e.runningFolders() {
		f.requestScan(nil)
	}
}

// Needed is an item a folder does not have as the other devices do.
type Needed struct {
	Name    string
	Type    index.Type
	Size    int64
	Deleted bool // the item is to be deleted here
	// By is the device that made the version needed; zero when it is not
	// one this folder is shared with.
	By crypt.DeviceID
	// Reason says why the item is not here yet: the error of its last
	// attempt, or what it waits for.
	Reason string
	// Failed: Reason is the error of an attempt, not a wait.
	Failed bool
}

// Reasons an item waits that are not an attempt's error.
const (
	ReasonQueued    = "waiting to be pulled"
	ReasonNoSource  = "no connected device has this version"
	ReasonSendOnly  = "the folder is send-only: it takes no changes from other devices"
	ReasonMassGuard = "held by the mass deletion guard"
)

// Needed lists up to limit items the folder needs (limit <= 0: all), in
// pull order, each with why it is not here yet, and how many it needs in
// all. It is ErrPaused for a paused folder and db.ErrNotFound for an
// unknown one.
func (e *Engine) Needed(ctx context.Context, folderID string, limit int) ([]Needed, int, error) {
	f := e.folder(folderID)
	if f == nil {
		return nil, 0, e.notRunning(ctx, folderID)
	}
	need := f.set.Need()
	total := len(need)
	if limit > 0 && len(need) > limit {
		need = need[:limit]
	}
	f.mu.Lock()
	failures := make(map[string]string, len(f.failures))
	for name, why := range f.failures {
		failures[name] = why
	}
	blocked, blockErr, typ := f.blocked, f.err, f.cfg.Type
	f.mu.Unlock()
	out := make([]Needed, 0, len(need))
	for i := range need {
		r := &need[i]
		n := Needed{Name: r.Name, Type: r.Type, Size: r.Size, Deleted: r.Deleted, By: f.device(r.ModifiedBy)}
		switch why, failed := failures[r.Name]; {
		case typ == db.SendOnly:
			n.Reason = ReasonSendOnly
		case failed:
			n.Reason, n.Failed = why, true
		case blocked && r.Deleted:
			n.Reason = ReasonMassGuard + ": " + blockErr
		case !r.Deleted && r.Type == index.File && !f.available(r):
			n.Reason = ReasonNoSource
		default:
			n.Reason = ReasonQueued
		}
		out = append(out, n)
	}
	return out, total, nil
}

// available reports whether a connected peer, or a receiver, can serve
// r's version.
func (f *folder) available(r *index.Record) bool {
	for _, d := range f.set.Has(r.Name, r.Version) {
		if f.e.opts.Net.Connected(d) {
			return true
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for d := range f.receivers {
		if f.e.opts.Net.Connected(d) {
			return true
		}
	}
	return false
}

// device is the device of a short ID among this node and the folder's
// shares; zero if none.
func (f *folder) device(s crypt.ShortID) crypt.DeviceID {
	if f.e.id.Short() == s {
		return f.e.id
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for d := range f.shares {
		if d.Short() == s {
			return d
		}
	}
	return crypt.DeviceID{}
}

// notRunning is the error for a folder that does not run: paused, or
// not configured.
func (e *Engine) notRunning(ctx context.Context, folderID string) error {
	cfg, err := e.db.Folder(ctx, folderID)
	if err != nil {
		return err
	}
	if cfg.Paused {
		return fmt.Errorf("folder %q: %w", folderID, ErrPaused)
	}
	return fmt.Errorf("%w: folder %q does not run here", db.ErrNotFound, folderID)
}

// Change is a change to a folder's item: made here and found by a scan,
// or made on another device and pulled.
type Change struct {
	Time    time.Time
	Name    string
	Type    index.Type
	Action  string // events.ActionUpdate or events.ActionDelete
	Size    int64
	By      crypt.DeviceID // who made it; zero if not a known device
	Local   bool           // made on this device
	Version string         // the version vector, to tell changes of the same name apart
}

// maxChanges bounds the recent changes a folder keeps in memory.
const maxChanges = 200

// changeLog is a folder's recent changes, oldest first, bounded.
type changeLog struct {
	items []Change
}

func (l *changeLog) add(c Change) {
	if len(l.items) == maxChanges {
		copy(l.items, l.items[1:])
		l.items = l.items[:maxChanges-1]
	}
	l.items = append(l.items, c)
}

// noteChanges records changes to the folder's items that r describes.
func (f *folder) noteChanges(recs []index.Record, local bool) {
	now := time.Now()
	cs := make([]Change, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		action := events.ActionUpdate
		if r.Deleted {
			action = events.ActionDelete
		}
		cs = append(cs, Change{Time: now, Name: r.Name, Type: r.Type, Action: action, Size: r.Size, By: f.device(r.ModifiedBy), Local: local, Version: r.Version.String()})
	}
	f.mu.Lock()
	for _, c := range cs {
		f.changes.add(c)
	}
	f.mu.Unlock()
}

// RecentChanges returns up to the last maxChanges changes to the folder's
// items since the node started, newest first. It is ErrPaused for a
// paused folder and db.ErrNotFound for an unknown one.
func (e *Engine) RecentChanges(ctx context.Context, folderID string) ([]Change, error) {
	f := e.folder(folderID)
	if f == nil {
		return nil, e.notRunning(ctx, folderID)
	}
	f.mu.Lock()
	out := make([]Change, len(f.changes.items))
	for i, c := range f.changes.items {
		out[len(out)-1-i] = c
	}
	f.mu.Unlock()
	return out, nil
}

// MaxIgnoreSize bounds the ignore patterns SetIgnores writes.
const MaxIgnoreSize = 1 << 20

// Ignores returns the folder's ignore patterns as written ("" when it has
// none). It works on a paused folder too.
func (e *Engine) Ignores(ctx context.Context, folderID string) (string, error) {
	cfg, err := e.syncedFolder(ctx, folderID)
	if err != nil {
		return "", err
	}
	root, err := fsys.Open(cfg.Path)
	if err != nil {
		return "", err
	}
	defer root.Close()
	file, err := root.Open(scan.IgnoreFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, MaxIgnoreSize+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxIgnoreSize {
		return "", fmt.Errorf("%s is larger than %d bytes", scan.IgnoreFile, MaxIgnoreSize)
	}
	return string(b), nil
}

// ErrBadIgnores means ignore patterns were refused; the error says which
// line.
var ErrBadIgnores = errors.New("invalid ignore patterns")

// SetIgnores replaces the folder's ignore patterns with text, atomically
// (a scan never reads half of them), and rescans a running folder so
// they take effect. Patterns that do not parse are refused
// (ErrBadIgnores) and the file is left as it was.
func (e *Engine) SetIgnores(ctx context.Context, folderID, text string) error {
	if len(text) > MaxIgnoreSize {
		return fmt.Errorf("%w: more than %d bytes", ErrBadIgnores, MaxIgnoreSize)
	}
	if _, err := scan.ParseIgnore(strings.NewReader(text)); err != nil {
		return fmt.Errorf("%w: %v", ErrBadIgnores, err)
	}
	cfg, err := e.syncedFolder(ctx, folderID)
	if err != nil {
		return err
	}
	root, err := fsys.Open(cfg.Path)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := writeAtomic(root, scan.IgnoreFile, []byte(text)); err != nil {
		return fmt.Errorf("writing %s: %w", scan.IgnoreFile, err)
	}
	if f := e.folder(folderID); f != nil {
		f.requestScan(nil)
	}
	return nil
}

// syncedFolder is the configuration of a folder synced here, paused or
// not: an encrypted folder has no ignore patterns.
func (e *Engine) syncedFolder(ctx context.Context, folderID string) (db.Folder, error) {
	cfg, err := e.db.Folder(ctx, folderID)
	if err != nil {
		return db.Folder{}, err
	}
	if cfg.Type == db.Encrypted {
		return db.Folder{}, fmt.Errorf("%w: folder %q is held encrypted for other devices; it has no ignore patterns here", db.ErrConstraint, folderID)
	}
	return cfg, nil
}

// writeAtomic writes data to name in root through a synced temp file
// renamed into place, so a reader sees the old content or the new.
func writeAtomic(root *fsys.Root, name string, data []byte) error {
	file, tmp, err := root.CreateTemp(name)
	if err != nil {
		return err
	}
	_, err = file.Write(data)
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
		return err
	}
	return root.SyncDir(".")
}

// announceLocalOnly makes the changes a receive-only folder kept to
// itself, deletions too, ordinary local changes once the folder is of
// another type: they are announced with the versions they got, so a peer
// takes them or, where it changed the same item, keeps both as a
// conflict. Left flagged, they would stay unannounced until each item
// happened to change again, and a deletion for good.
func (f *folder) announceLocalOnly(ctx context.Context) error {
	if f.config().Type == db.ReceiveOnly {
		return nil
	}
	names, err := f.e.db.LocalNamesFlagged(ctx, f.id, index.FlagLocalOnly)
	if err != nil || len(names) == 0 {
		return err
	}
	recs := make([]index.Record, 0, len(names))
	for _, name := range names {
		if r, ok := f.set.Local(name); ok && r.Flags&index.FlagLocalOnly != 0 {
			r.Flags &^= index.FlagLocalOnly
			recs = append(recs, r)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	if _, err := f.set.UpdateLocal(ctx, recs); err != nil {
		return err
	}
	f.log.Info("announcing changes made while the folder was receive-only", "items", len(recs))
	f.notifyIndex()
	return nil
}
