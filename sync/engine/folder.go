package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/storage/syncahead"
	"lockstep/sync/events"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/scan"
	"lockstep/sync/versions"
)

// Folder states reported in status. A folder starts in StateStarting and
// leaves it for good when its first scan begins.
const (
	StateStarting = "starting"
	StateIdle     = "idle"
	StateScanning = "scanning"
	StateSyncing  = "syncing"
	StateError    = "error"
)

// folder is one synced folder: its files, its index and its loop.
type folder struct {
	id    string // the folder ID; unlike cfg, never changes
	e     *Engine
	fs    *fsys.Root
	set   *index.Set
	short crypt.ShortID
	log   *slog.Logger

	pullCh chan struct{}      // a peer's index changed: look at what is needed
	scanCh chan struct{}      // scanPaths has work
	ahead  *syncahead.Flusher // barriers in the background as a pull writes

	polMu sync.Mutex // creating or changing the polynomial

	mu         sync.Mutex
	cfg        db.Folder
	shares     map[crypt.DeviceID]bool
	state      string
	err        string // error shown in status; the folder keeps running unless blocked
	blocked    bool   // stopped before a mass deletion
	allowMass  bool
	scanAll    bool
	scanPaths  []string
	changed    chan struct{}     // closed when the local index changes
	failures   map[string]string // the latest failure of each item, logged once
	pullFailed bool              // err is a pull's

	deletions  deletionHold    // the mass deletion guard's; the loop's only
	ignores    *scan.Matcher   // the latest scan's patterns, or nil
	partials   map[string]bool // partial files of pulls, to remove once nothing is needed
	pullTotal  int64           // bytes this pull needs
	pullDone   int64           // bytes of it done
	lastPulled time.Time

	receivers map[crypt.DeviceID]bool // shares that are untrusted receivers

	changes changeLog // recent changes to its items, for the console

	archive *versions.Archive // nil: versioning off

	// beforeReplace, when set (tests), runs in commit after the file in
	// place was checked and before it is replaced.
	beforeReplace atomic.Pointer[func(name string)]

	// Since start: block bytes fetched from peers, and copied from local
	// files instead; bytes read by scans to be chunked.
	pulledBytes, reusedBytes, pulledBlocks atomic.Int64
	// Since start: bytes a pull found already written in a partial file
	// left by an interrupted one.
	resumedBytes atomic.Int64
	hashedBytes  atomic.Int64
}

func newFolder(ctx context.Context, e *Engine, cfg db.Folder) (*folder, error) {
	if err := os.MkdirAll(cfg.Path, 0o755); err != nil {
		return nil, fmt.Errorf("creating folder path: %w", err)
	}
	root, err := fsys.Open(cfg.Path)
	if err != nil {
		return nil, err
	}
	set, err := index.Load(ctx, e.db, cfg.ID)
	if err != nil {
		root.Close()
		return nil, err
	}
	return &folder{
		id: cfg.ID, e: e, fs: root, set: set, short: e.id.Short(), ahead: syncahead.New(root.Sync),
		log:       e.log.With("folder", cfg.ID),
		pullCh:    make(chan struct{}, 1),
		scanCh:    make(chan struct{}, 1),
		cfg:       cfg,
		shares:    map[crypt.DeviceID]bool{},
		receivers: map[crypt.DeviceID]bool{},
		state:     StateStarting,
		changed:   make(chan struct{}),
		scanAll:   true,
	}, nil
}

func (f *folder) setConfig(cfg db.Folder) {
	f.mu.Lock()
	f.cfg = cfg
	f.mu.Unlock()
	if err := f.refreshShares(context.Background()); err != nil {
		f.log.Warn("reading folder shares", "err", err)
	}
}

func (f *folder) refreshShares(ctx context.Context) error {
	devs, err := f.e.db.FolderDevices(ctx, f.id)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return err
	}
	m, recv := map[crypt.DeviceID]bool{}, map[crypt.DeviceID]bool{}
	for _, d := range devs {
		id, err := crypt.ParseDeviceID(d)
		if err != nil {
			continue
		}
		m[id] = true
		if dev, err := f.e.db.Device(ctx, d); err == nil && dev.Untrusted {
			recv[id] = true
		}
	}
	f.mu.Lock()
	f.shares = m
	f.receivers = recv
	f.mu.Unlock()
	f.requestPull()
	return nil
}

// untrusted reports whether dev is a receiver of this folder: it shares
// the folder and is marked untrusted.
func (f *folder) untrusted(dev crypt.DeviceID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.receivers[dev]
}

func (f *folder) sharedWith(id crypt.DeviceID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shares[id]
}

func (f *folder) config() db.Folder {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg
}

// indexChanged returns a channel closed at the next local index change.
func (f *folder) indexChanged() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *folder) notifyIndex() {
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *folder) requestPull() {
	select {
	case f.pullCh <- struct{}{}:
	default:
	}
}

// requestScan asks for a scan of paths; nil or a "" entry means all.
func (f *folder) requestScan(paths []string) {
	f.mu.Lock()
	if paths == nil {
		f.scanAll = true
	}
	for _, p := range paths {
		if p == "" {
			f.scanAll = true
		}
	}
	f.scanPaths = append(f.scanPaths, paths...)
	f.mu.Unlock()
	select {
	case f.scanCh <- struct{}{}:
	default:
	}
}

func (f *folder) setState(s string) {
	f.changeState(func() { f.state = s })
}

func (f *folder) setError(err error) {
	f.changeState(func() {
		f.err = ""
		if err != nil {
			f.err = err.Error()
		}
	})
}

// changeState runs change under f.mu and publishes the folder's state as
// status shows it, when that changed.
func (f *folder) changeState(change func()) {
	f.mu.Lock()
	from := f.shownState()
	change()
	to, msg := f.shownState(), f.err
	f.mu.Unlock()
	if from != to {
		f.e.opts.Events.Publish(events.FolderStateChanged{Folder: f.id, From: from, State: to, Error: msg})
	}
}

// shownState is the state status reports: an error shows while the
// folder is stopped by it or idle. The caller holds f.mu.
func (f *folder) shownState() string {
	if f.err != "" && (f.blocked || f.state == StateIdle) {
		return StateError
	}
	return f.state
}

func (f *folder) allowDeletes() {
	f.changeState(func() {
		f.allowMass = true
		f.blocked = false
		f.err = ""
	})
	f.requestPull()
}

func (f *folder) peerGone(crypt.DeviceID) {
	// Pulls in flight from the peer fail on their own; a retry picks other
	// sources.
	f.requestPull()
}

// serve runs the folder until ctx ends.
func (f *folder) serve(ctx context.Context) {
	defer f.fs.Close()
	f.removeTemps(ctx, ".")
	f.applyJoinHint(ctx)
	if err := f.announceLocalOnly(ctx); err != nil {
		f.log.Warn("announcing the changes made while receive-only", "err", err)
	}
	if p, err := f.e.versioningPolicy(ctx, f.id); err != nil {
		f.log.Warn("reading versioning policy; versioning is off", "err", err)
	} else {
		f.setArchive(versions.New(f.fs, p), p)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	w, err := scan.NewWatcher(f.config().Path, f.ignored, f.e.opts.WatchDelay)
	if err != nil {
		f.log.Warn("watching for changes failed; relying on periodic rescans", "err", err)
	} else {
		wg.Go(func() {
			if err := w.Serve(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("watcher stopped; relying on periodic rescans", "err", err)
			}
		})
		wg.Go(func() {
			for {
				select {
				case paths := <-w.Changes():
					f.requestScan(paths)
				case <-ctx.Done():
					return
				}
			}
		})
	}

	rescan := time.NewTicker(f.e.opts.RescanInterval)
	defer rescan.Stop()
	clean := time.NewTicker(versionCleanInterval)
	defer clean.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff := retryBackoff{min: pullRetryMin, max: pullRetryMax}
	f.requestScan(nil)
	for {
		// Scans go first: a pull decides on the local state, which must be
		// current.
		select {
		case <-ctx.Done():
			return
		case <-f.scanCh:
			f.runScan(ctx)
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-f.scanCh:
			f.runScan(ctx)
		case <-rescan.C:
			f.requestScan(nil)
		case <-clean.C:
			f.cleanVersions()
		case <-f.pullCh:
			if again := f.runPull(ctx); again {
				retry.Reset(backoff.next())
			} else {
				backoff.reset()
			}
		case <-retry.C:
			f.requestPull()
		}
	}
}

// ignored is the watcher's filter; the scanner applies the full rules.
func (f *folder) ignored(name string, isDir bool) bool {
	base := path.Base(name)
	return name == fsys.InternalDir || fsys.IsTemp(base)
}

func (f *folder) runScan(ctx context.Context) {
	f.mu.Lock()
	all, paths := f.scanAll, f.scanPaths
	f.scanAll, f.scanPaths = false, nil
	f.mu.Unlock()
	if all {
		paths = nil
	} else if len(paths) == 0 {
		return
	}
	f.setState(StateScanning)
	start := time.Now()
	err := f.scan(ctx, paths)
	for range 3 {
		if !errors.Is(err, errPolynomialChanged) {
			break
		}
		// A peer's polynomial arrived before this scan recorded anything:
		// scan everything again with it.
		f.log.Debug("rescanning with the adopted chunking polynomial")
		err = f.scan(ctx, nil)
	}
	failed := err != nil && ctx.Err() == nil
	// Idle and the error in one change: in between, the folder looked
	// scanned and well (to `folder add --wait`, say).
	f.changeState(func() {
		f.state = StateIdle
		if failed {
			f.err = "scan: " + err.Error()
		}
	})
	f.log.Debug("scan done", "paths", len(paths), "took", time.Since(start))
	f.e.opts.Events.Publish(events.FolderSummary{Folder: f.id})
	if failed {
		f.log.Warn("scan failed", "err", err)
		f.e.opts.Events.Publish(events.FolderError{Folder: f.id, Error: "scan: " + err.Error()})
		return
	}
	f.requestPull()
}

// partialMaxAge is how long a partial file is kept for a pull to resume.
const partialMaxAge = 24 * time.Hour

// staleTemp reports whether a temp file is older than partialMaxAge.
func staleTemp(de fs.DirEntry) bool {
	fi, err := de.Info()
	return err != nil || time.Since(fi.ModTime()) > partialMaxAge
}

// removeTemps deletes temp files a crash left behind, but partial files
// of pulls to resume, for a day.
func (f *folder) removeTemps(ctx context.Context, dir string) {
	entries, err := f.fs.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range entries {
		if ctx.Err() != nil {
			return
		}
		name := de.Name()
		full := path.Join(dir, name)
		if dir == "." {
			full = name
		}
		switch {
		case fsys.IsPartial(name) && !staleTemp(de):
			// Kept for a pull to resume from, until nothing is needed.
			f.notePartial(full)
		case fsys.IsTemp(name):
			if err := f.fs.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
				f.log.Warn("removing a leftover temp file", "name", full, "err", err)
			}
		case de.IsDir() && de.Type()&fs.ModeSymlink == 0 && full != fsys.InternalDir:
			f.removeTemps(ctx, full)
		}
	}
}
