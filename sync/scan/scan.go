package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"

	"github.com/restic/chunker"
	"golang.org/x/sync/errgroup"

	"lockstep/chunk"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// Errors given to Options.OnSkip (wrapped) and returned by Scan. Match them
// with errors.Is. Names that fail fsys.ValidName are reported with its
// error, which wraps fsys.ErrInvalidName.
var (
	// ErrChanging: a file changed while it was being hashed, twice in a
	// row. Retryable: the next scan tries again.
	ErrChanging = errors.New("file changed while being hashed")
	// ErrSpecial: a device, FIFO, socket or other file that is neither a
	// regular file, a directory nor a symlink. Permanent: never synced.
	ErrSpecial = errors.New("not a regular file, directory or symlink")
	// ErrKnownOrder: Known.EachLocal returned names out of order; Scan
	// stops rather than report wrong deletions.
	ErrKnownOrder = errors.New("known records not in name order")
)

// FS is what Scan reads a folder through; *fsys.Root implements it. Names
// are folder-relative, "." is the folder itself.
type FS interface {
	// Lstat describes name without following a symlink.
	Lstat(name string) (fs.FileInfo, error)
	// Open opens the regular file name for reading; it fails on a symlink.
	Open(name string) (fsys.File, error)
	// ReadDir lists the directory name; entries' Info must describe the
	// entry itself, not a symlink's target.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Readlink returns the target of the symlink name, as stored.
	Readlink(name string) (string, error)
}

// Known is the scanner's view of the previous state (the local index).
// Scan calls its methods from one goroutine at a time, and never Local
// while an EachLocal is in progress.
type Known interface {
	// Local returns the current local record of name, ok=false if none.
	// A deleted record counts as none.
	Local(name string) (index.Record, bool)
	// EachLocal calls fn for every local record not deleted, in name
	// order (byte-wise, as strings compare). An error from fn stops the
	// iteration and is returned unchanged.
	EachLocal(fn func(index.Record) error) error
}

// KnownUnder is an optional interface of a Known that can iterate one
// subtree cheaply. Scan of a subtree uses it when present; otherwise it
// iterates EachLocal from the start and stops after the subtree.
type KnownUnder interface {
	// EachLocalUnder calls fn, in name order, for every local record not
	// deleted whose name starts with dir + "/". An error from fn stops the
	// iteration and is returned unchanged.
	EachLocalUnder(dir string, fn func(index.Record) error) error
}

// Options configure Scan.
type Options struct {
	// Polynomial is the folder's chunking polynomial (see package chunk).
	Polynomial chunker.Pol
	// Workers is the number of files hashed in parallel; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Ignore decides which names are ignored; nil ignores only the
	// built-in names (see Matcher).
	Ignore *Matcher
	// OnSkip, if set, is told about every name Scan skips and why:
	// invalid names, special files, entries that cannot be read, files
	// that keep changing (ErrChanging). It is called from the goroutine
	// that calls fn, never concurrently with fn.
	OnSkip func(name string, err error)
	// BeforeHashing, if set, is called once, before the first file is
	// read to be chunked; an error from it ends the scan with that error.
	// A folder fixes its polynomial there, so that no work done with it is
	// thrown away because a peer's replaced it meanwhile.
	BeforeHashing func() error
	// Hashed, if set, is told the bytes read from each file chunked. It is
	// called from the hashing goroutines, concurrently.
	Hashed func(n int64)
}

// Scan walks the folder, or only the given subtrees when paths is
// non-empty (for watcher-triggered scans; "" or "." means the whole
// folder), and calls fn with every record that differs from known:
//
//   - new or changed files, re-chunked and hashed;
//   - new or changed directories (type or permission bits) and symlinks
//     (type or target);
//   - metadata-only changes: a file whose size, mtime and inode match its
//     known record but whose mode differs gets a record with the known
//     Blocks and is not re-read (an inode of 0 on either side is unknown
//     and not compared; a changed mtime always means a re-read, because
//     content can change without changing size);
//   - deletions: records of known under the scanned paths whose names no
//     longer exist, as records with Deleted set, Blocks, Size, Target and
//     Inode zero, and Name, Type, Mode and ModTime from the known record.
//
// Records have Name, Type, Size, Mode (permission bits), ModTime (ns),
// Blocks, Target and Inode filled; Version, Sequence and ModifiedBy are
// left for the caller. A directory's mtime is recorded but not compared.
//
// fn is called from the calling goroutine, in no particular order; an
// error from fn stops the scan and is returned unchanged. Hashing runs on
// Options.Workers goroutines that end before Scan returns. Skipped names
// go to Options.OnSkip. Scan returns ctx's error when ctx ends, an error
// if the folder root cannot be listed or known fails, and nil otherwise.
func Scan(ctx context.Context, folder FS, known Known, paths []string, opts Options, fn func(index.Record) error) error {
	pol := opts.Polynomial
	if pol.Deg() != chunk.PolynomialDegree || !pol.Irreducible() {
		return fmt.Errorf("scan: %w: %v", chunk.ErrPolynomial, pol)
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	scopes := minimalPaths(paths)
	if len(scopes) == 0 {
		scopes = []string{""}
	}

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	jobs := make(chan hashJob, workers)
	events := make(chan event, 64)
	out := outbox{ctx: gctx, events: events}

	var producers sync.WaitGroup
	producers.Add(1 + workers)
	g.Go(func() error {
		defer producers.Done()
		defer close(jobs)
		w := &walker{ctx: gctx, fs: folder, known: known, ignore: opts.Ignore, jobs: jobs, out: out, beforeHashing: opts.BeforeHashing}
		return w.walk(scopes)
	})
	sps := newSplitters(pol, workers)
	for range workers {
		g.Go(func() error {
			defer producers.Done()
			h := &hasher{ctx: gctx, fs: folder, sps: sps, out: out, hashed: opts.Hashed}
			return h.run(jobs)
		})
	}
	g.Go(func() error {
		producers.Wait()
		close(events)
		return nil
	})

	var fnErr error
	for ev := range events {
		switch {
		case fnErr != nil, parent.Err() != nil:
			// Stopping: drain so that producers are never stuck.
		case ev.err != nil:
			if opts.OnSkip != nil {
				opts.OnSkip(ev.rec.Name, ev.err)
			}
		default:
			if err := fn(ev.rec); err != nil {
				fnErr = err
				cancel()
			}
		}
	}
	err := g.Wait()
	if fnErr != nil {
		return fnErr
	}
	if perr := parent.Err(); perr != nil {
		// Canceled after the producers were done, too late for them to
		// notice: the caller still hears of it, not of a complete scan.
		return perr
	}
	return err
}

// event is a record for fn or, when err is set, a skipped name
// (rec.Name) for OnSkip.
type event struct {
	rec index.Record
	err error
}

// outbox sends events to Scan's goroutine until the scan is stopped.
type outbox struct {
	ctx    context.Context
	events chan<- event
}

func (o outbox) record(r index.Record) error {
	return o.send(event{rec: r})
}

func (o outbox) skip(name string, err error) error {
	return o.send(event{rec: index.Record{Name: name}, err: err})
}

func (o outbox) send(ev event) error {
	select {
	case o.events <- ev:
		return nil
	case <-o.ctx.Done():
		return o.ctx.Err()
	}
}
