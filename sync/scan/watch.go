package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"lockstep/sync/fsys"
)

// DefaultDelay is how long a Watcher collects events after the first one
// of a batch when NewWatcher is given no delay.
const DefaultDelay = 50 * time.Millisecond

// ErrWatchLimit is reported to Watcher.OnError when the system refuses
// more watches (inotify's max_user_watches or max_user_instances). Changes
// in the directories left unwatched are only found by periodic rescans.
var ErrWatchLimit = errors.New("file watch limit reached")

// Watcher watches a folder recursively and reports which paths changed.
//
// Every real directory of the folder is watched, except ignored ones and
// the internal directory; symlinks are never followed. New directories are
// watched as they appear and reported as changed paths themselves, which
// covers whatever landed in them before their watch was added. Events for
// the internal directory and temp files are dropped.
type Watcher struct {
	// OnError, if set before Serve, is told about problems that do not
	// stop the watcher: the watch limit (ErrWatchLimit), directories that
	// cannot be watched, errors from the system. It is called from Serve's
	// goroutine.
	OnError func(error)

	root    string
	ignore  func(name string, isDir bool) bool
	delay   time.Duration
	changes chan []string
	watched map[string]bool // folder-relative directories being watched
	fw      *fsnotify.Watcher
	full    bool        // a watch was refused: some directories are not watched
	q       *eventQueue // fsnotify's events and errors, as they come
	// addWatch adds one watch (fw.Add); tests replace it to inject errors.
	addWatch func(path string) error
}

// NewWatcher returns a watcher for the folder at root. ignore, if not nil,
// says which folder-relative names to leave alone (Matcher.Match fits);
// delay is how long to collect events into one batch, DefaultDelay if not
// positive. The watcher does nothing until Serve.
func NewWatcher(root string, ignore func(name string, isDir bool) bool, delay time.Duration) (*Watcher, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("scan: watching %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("scan: watching: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("scan: watching %s: not a directory", root)
	}
	if delay <= 0 {
		delay = DefaultDelay
	}
	return &Watcher{root: abs, ignore: ignore, delay: delay, changes: make(chan []string), q: newEventQueue()}, nil
}

// Changes returns the channel batches are sent on. Each batch is a
// non-empty, sorted, minimal set of folder-relative paths (no path is
// under another); "" alone means "rescan everything" (events were lost).
// The channel is closed when Serve returns.
func (w *Watcher) Changes() <-chan []string { return w.changes }

// Serve watches until ctx ends and then returns nil. Events are collected
// for the watcher's delay after the first one, deduplicated, reduced to a
// minimal set and sent on Changes; while a batch waits to be received, new
// events are merged into it. Serve returns an error only if the folder
// cannot be watched at all for a reason other than the watch limit (which
// goes to OnError, after which Serve waits for ctx). Serve may be called
// once.
func (w *Watcher) Serve(ctx context.Context) error {
	defer close(w.changes)
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		if isLimit(err) {
			w.report(fmt.Errorf("%w: %v", ErrWatchLimit, err))
			<-ctx.Done()
			return nil
		}
		return fmt.Errorf("scan: starting watcher: %w", err)
	}
	w.fw = fw
	if w.addWatch == nil {
		w.addWatch = fw.Add
	}
	w.watched = make(map[string]bool)
	q := w.q
	var wg sync.WaitGroup
	wg.Go(func() { q.pump(fw, w.root) })
	defer wg.Wait()  // the pump ends when fw's channels close
	defer fw.Close() // runs first

	w.addTree("")
	pending := make(map[string]bool)
	var (
		timer *time.Timer
		fire  <-chan time.Time
		batch []string
		out   chan<- []string
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-q.signal:
			evs, errs := q.take()
			for _, ev := range evs {
				w.event(ev, pending)
			}
			for _, err := range errs {
				if errors.Is(err, fsnotify.ErrEventOverflow) {
					pending[""] = true
					w.addTree("") // directories created meanwhile may be unwatched
				} else {
					w.report(fmt.Errorf("scan: watcher: %w", err))
				}
			}
			if len(pending) > 0 && fire == nil {
				if timer == nil {
					timer = time.NewTimer(w.delay)
				} else {
					timer.Reset(w.delay)
				}
				fire = timer.C
			}
		case <-fire:
			fire = nil
			paths := batch
			for p := range pending {
				paths = append(paths, p)
			}
			clear(pending)
			batch = minimalPaths(paths)
			out = w.changes
		case out <- batch:
			batch, out = nil, nil
		}
	}
}

// event records the folder-relative path of ev in pending and keeps the
// set of watches up to date.
func (w *Watcher) event(ev fsnotify.Event, pending map[string]bool) {
	rel, ok := w.rel(ev.Name)
	if !ok || builtinIgnored(rel) {
		return
	}
	isDir := w.watched[rel]
	if !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) {
		if fi, err := os.Lstat(ev.Name); err == nil {
			isDir = fi.IsDir()
		}
	}
	if rel != "" && w.ignore != nil && w.ignore(rel, isDir) {
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		w.unwatchTree(rel)
	}
	if ev.Has(fsnotify.Create) && isDir {
		w.addTree(rel)
	}
	pending[rel] = true
}

// rel returns the folder-relative, '/'-separated form of the path p.
func (w *Watcher) rel(p string) (string, bool) {
	r, err := filepath.Rel(w.root, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	if r == "." {
		return "", true
	}
	return filepath.ToSlash(r), true
}

// builtinIgnored reports a name inside the internal directory or a temp
// file, whatever the ignore patterns say.
func builtinIgnored(rel string) bool {
	for c := range strings.SplitSeq(rel, "/") {
		if c == fsys.InternalDir || fsys.IsTemp(c) {
			return true
		}
	}
	return false
}

// addTree watches the directory rel and every real, non-ignored directory
// under it. After the watch limit is hit it stops adding.
func (w *Watcher) addTree(rel string) {
	if w.full {
		return
	}
	start := filepath.Join(w.root, filepath.FromSlash(rel))
	filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // unreadable or not a directory: nothing to watch
		}
		r, ok := w.rel(p)
		if !ok {
			return filepath.SkipDir
		}
		if r != "" && (builtinIgnored(r) || w.ignore != nil && w.ignore(r, true)) {
			return filepath.SkipDir
		}
		if err := w.addWatch(p); err != nil {
			switch {
			case isLimit(err):
				w.full = true
				w.report(fmt.Errorf("%w: %s: %v", ErrWatchLimit, p, err))
				return filepath.SkipAll
			case errors.Is(err, fs.ErrNotExist):
			default:
				w.report(fmt.Errorf("scan: watching %s: %w", p, err))
			}
			return filepath.SkipDir
		}
		w.watched[r] = true
		return nil
	})
}

// unwatchTree drops the watches of rel and everything under it: the
// directory is gone or moved, and a moved directory is watched again under
// its new name when its Create event arrives.
func (w *Watcher) unwatchTree(rel string) {
	for d := range w.watched {
		if isUnder(d, rel) {
			w.fw.Remove(filepath.Join(w.root, filepath.FromSlash(d)))
			delete(w.watched, d)
		}
	}
}

func (w *Watcher) report(err error) {
	if w.OnError != nil {
		w.OnError(err)
	}
}

// isLimit reports the errors inotify gives when its limits are reached.
func isLimit(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE)
}

// eventQueue takes fsnotify's events and errors as fast as they come, so
// fsnotify's reader (which may hold its lock while sending an error) is
// never blocked by Serve calling Add or Remove.
type eventQueue struct {
	mu     sync.Mutex
	evs    []fsnotify.Event
	errs   []error
	signal chan struct{} // one token: something is queued
}

func newEventQueue() *eventQueue {
	return &eventQueue{signal: make(chan struct{}, 1)}
}

// pump queues everything from fw until fw is closed, but the events of
// temp files under root.
func (q *eventQueue) pump(fw *fsnotify.Watcher, root string) {
	evs, errs := fw.Events, fw.Errors
	for evs != nil || errs != nil {
		select {
		case ev, ok := <-evs:
			if !ok {
				evs = nil
				continue
			}
			// Most events of a pull are of its temp files (created,
			// written, chmodded, renamed away): dropped here, unqueued.
			if ev.Name != root && fsys.IsTemp(filepath.Base(ev.Name)) {
				continue
			}
			q.push(&ev, nil)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			q.push(nil, err)
		}
	}
}

// push queues an event or an error and wakes Serve.
func (q *eventQueue) push(ev *fsnotify.Event, err error) {
	q.mu.Lock()
	if ev != nil {
		q.evs = append(q.evs, *ev)
	}
	if err != nil {
		q.errs = append(q.errs, err)
	}
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// take returns and clears what is queued.
func (q *eventQueue) take() ([]fsnotify.Event, []error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs, errs := q.evs, q.errs
	q.evs, q.errs = nil, nil
	return evs, errs
}
