package engine

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/restic/chunker"

	"lockstep/chunk"
	"lockstep/storage/db"
	"lockstep/sync/index"
	"lockstep/sync/scan"
)

// A scan commits and announces its changes when it has this many records
// or this many bytes of changed files, so peers start pulling large files
// while the rest is still being hashed.
const (
	scanBatch      = 1000
	scanBatchBytes = 64 << 20
)

// known adapts the index to what the scanner asks: deleted records count
// as absent.
type known struct{ set *index.Set }

func (k known) Local(name string) (index.Record, bool) {
	r, ok := k.set.Local(name)
	if !ok || r.Deleted {
		return index.Record{}, false
	}
	return r, true
}

func (k known) EachLocal(fn func(index.Record) error) error { return k.set.EachLocal(fn) }

// EachLocalUnder lets subtree scans (every watcher event) visit only their
// part of the index.
func (k known) EachLocalUnder(dir string, fn func(index.Record) error) error {
	return k.set.EachLocalUnder(dir, fn)
}

// scan finds local changes under paths (all when nil), gives each a new
// version and announces them.
func (f *folder) scan(ctx context.Context, paths []string) error {
	pol, err := f.polynomial(ctx)
	if err != nil {
		return err
	}
	ign, err := f.loadIgnore()
	if err != nil {
		f.log.Warn("reading .lockstepignore", "err", err)
	}
	f.mu.Lock()
	f.ignores = ign
	f.mu.Unlock()
	cfg := f.config()
	now := uint64(time.Now().Unix())
	var (
		batch      []index.Record
		batchBytes int64
		changed    []index.Record // of batch, those with a new version
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := f.set.UpdateLocal(ctx, batch); err != nil {
			return err
		}
		f.noteChanges(changed, true)
		batch, batchBytes, changed = batch[:0], 0, changed[:0]
		f.notifyIndex()
		return nil
	}
	opts := scan.Options{
		Polynomial: pol,
		Ignore:     ign,
		OnSkip: func(name string, err error) {
			f.log.Info("not syncing", "name", name, "reason", err)
		},
		BeforeHashing: func() error { return f.fixPolynomial(ctx, pol) },
		Hashed:        func(n int64) { f.hashedBytes.Add(n) },
	}
	err = scan.Scan(ctx, f.fs, known{f.set}, paths, opts, func(r index.Record) error {
		old, had := f.set.Local(r.Name)
		switch {
		case had && old.SameContent(&r) && !old.Deleted:
			// Only local details changed (an inode after a copy): keep
			// the version so peers need nothing.
			r.Version, r.ModifiedBy, r.Flags = old.Version, old.ModifiedBy, old.Flags
		case had && r.Deleted && old.Deleted:
			return nil
		default:
			if had {
				r.Version = old.Version
			}
			r.Version = r.Version.Update(f.short, now)
			r.ModifiedBy = f.short
			if cfg.Type == db.ReceiveOnly {
				r.Flags |= index.FlagLocalOnly
			}
			changed = append(changed, r)
		}
		batch = append(batch, r)
		batchBytes += r.Size
		if len(batch) >= scanBatch || batchBytes >= scanBatchBytes {
			return flush()
		}
		return nil
	})
	if ferr := flush(); err == nil {
		err = ferr
	}
	return err
}

// loadIgnore reads .lockstepignore; a missing file ignores nothing extra.
func (f *folder) loadIgnore() (*scan.Matcher, error) {
	file, err := f.fs.Open(".lockstepignore")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return scan.ParseIgnore(file)
}

// ignoredName reports whether the patterns of the latest scan ignore the
// file name.
func (f *folder) ignoredName(name string) bool {
	f.mu.Lock()
	m := f.ignores
	f.mu.Unlock()
	return m != nil && m.Match(name, false)
}

// errPolynomialChanged ends a scan whose polynomial was replaced by a
// peer's before the scan chunked any file; the scan starts over.
var errPolynomialChanged = errors.New("chunking polynomial changed during the scan")

// polynomial returns the folder's chunking polynomial, choosing a random
// one on first use. Trusted peers may replace it (see adoptPolynomial) until
// the folder starts to chunk files with it.
func (f *folder) polynomial(ctx context.Context) (chunker.Pol, error) {
	f.polMu.Lock()
	defer f.polMu.Unlock()
	return f.polynomialLocked(ctx)
}

// polynomialState returns the folder's chunking polynomial and whether it
// is fixed, for the cluster config.
func (f *folder) polynomialState(ctx context.Context) (pol chunker.Pol, fixed bool, err error) {
	f.polMu.Lock()
	defer f.polMu.Unlock()
	pol, err = f.polynomialLocked(ctx)
	return pol, err == nil && f.polFixed(ctx), err
}

func (f *folder) polynomialLocked(ctx context.Context) (chunker.Pol, error) {
	v, _, err := f.e.db.Polynomial(ctx, f.id)
	if err == nil {
		return chunker.Pol(v), nil
	}
	if !errors.Is(err, db.ErrNotFound) {
		return 0, err
	}
	p, err := chunker.RandomPolynomial()
	if err != nil {
		return 0, err
	}
	return p, f.e.db.SetPolynomial(ctx, f.id, uint64(p))
}

// fixPolynomial is called before a scan chunks its first file: it checks
// that pol, the polynomial the scan chunks with, is still the folder's,
// and fixes it for good. Fixing it then, not when the scan records its
// first files, matters: a scan that took a peer's polynomial after it had
// begun threw away everything it had chunked so far (one 256 MiB file in
// half the runs of the sync benchmark, when the empty peer's polynomial
// was the smaller). Trusted peers hear of it at once, so that an empty
// one adopts it.
func (f *folder) fixPolynomial(ctx context.Context, pol chunker.Pol) error {
	fixed, err := f.markFixed(ctx, pol)
	if err != nil || !fixed {
		return err
	}
	f.e.opts.Net.Announce(ctx, f.id)
	return nil
}

// markFixed fixes pol and reports whether it did so now.
func (f *folder) markFixed(ctx context.Context, pol chunker.Pol) (bool, error) {
	f.polMu.Lock()
	defer f.polMu.Unlock()
	if f.polFixed(ctx) {
		return false, nil
	}
	cur, err := f.polynomialLocked(ctx)
	if err != nil {
		return false, err
	}
	if cur != pol {
		return false, errPolynomialChanged
	}
	return true, f.e.db.FixPolynomial(ctx, f.id)
}

// polFixed reports whether the folder's polynomial never changes again: a
// scan began to chunk files with it, or the folder holds files. Callers
// hold polMu.
func (f *folder) polFixed(ctx context.Context) bool {
	if _, fixed, err := f.e.db.Polynomial(ctx, f.id); err == nil && fixed {
		return true
	}
	fixed := false
	f.set.EachLocal(func(r index.Record) error {
		if r.Type == index.File {
			fixed = true
			return errStop
		}
		return nil
	})
	return fixed
}

// adoptPolynomial lets devices sharing a folder chunk alike, so blocks
// line up and edits move only what changed. A folder that has not fixed its
// polynomial yet takes the peer's when the peer has files or has fixed its
// polynomial (a folder accepted from an offer chunks like its creator), or
// when both are empty and the peer's is smaller. Once a folder has begun to
// chunk files with its polynomial it keeps it: two folders created
// independently with files on both sides keep their own, and content stays
// correct, only block reuse between them suffers.
func (f *folder) adoptPolynomial(ctx context.Context, theirs uint64, theirsFixed bool) error {
	if p := chunker.Pol(theirs); theirs == 0 || p.Deg() != chunk.PolynomialDegree || !p.Irreducible() {
		return nil // not one the chunker takes (0x3 is irreducible, and of degree 1)
	}
	f.polMu.Lock()
	defer f.polMu.Unlock()
	mine, err := f.polynomialLocked(ctx)
	if err != nil || theirs == uint64(mine) || f.polFixed(ctx) {
		return err
	}
	if !theirsFixed && theirs > uint64(mine) {
		return nil
	}
	f.log.Debug("adopting a peer's chunking polynomial")
	return f.e.db.SetPolynomial(ctx, f.id, theirs)
}

var errStop = errors.New("stop")

// applyJoinHint takes the chunking polynomial a recovery left in the
// folder (index.JoinHint) when the folder has chunked nothing yet: the
// recovered files are then cut into the chunks their devices and
// receivers have. The hint is removed once read.
func (f *folder) applyJoinHint(ctx context.Context) {
	dir := f.config().Path
	h, ok, err := index.ReadJoinHint(dir)
	if err != nil {
		f.log.Warn("reading what the recovery left", "err", err)
		return
	}
	if !ok {
		return
	}
	pol := chunker.Pol(h.Polynomial)
	switch {
	case h.Folder != f.id:
		f.log.Info("the directory was recovered as another folder; chunking afresh", "recovered", h.Folder)
	case pol.Deg() != chunk.PolynomialDegree || !pol.Irreducible():
		f.log.Warn("the recovery's chunking polynomial is not one; chunking afresh")
	default:
		f.polMu.Lock()
		fixed := f.polFixed(ctx)
		if !fixed {
			err = f.e.db.SetPolynomial(ctx, f.id, uint64(pol))
			if err == nil {
				err = f.e.db.FixPolynomial(ctx, f.id)
			}
		}
		f.polMu.Unlock()
		if err != nil {
			f.log.Warn("taking the recovery's chunking polynomial", "err", err)
			return
		}
		if !fixed {
			f.log.Info("joining a recovered folder: chunking as its devices do")
		}
	}
	if err := index.RemoveJoinHint(dir); err != nil {
		f.log.Warn("removing what the recovery left", "err", err)
	}
}
