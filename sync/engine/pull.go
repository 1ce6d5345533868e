package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

// Pull tuning: blocks in flight per file, and bytes in flight in all.
const (
	blocksPerFile = 8
	maxBytesInAir = 48 << 20
	finisherBatch = 512
	// finisherGather is how long a batch of pulled items waits for more
	// to join it (gather).
	finisherGather = 25 * time.Millisecond
	massDeleteMinF = 4 // below this many local files the guard stays quiet

	// Files at least this large start their writeback block by block;
	// smaller ones are left to the batch barrier, which flushes many at
	// once far more cheaply than thousands of tiny writebacks.
	earlyWritebackSize = 16 << 20
)

// errChangedLocally means a local file changed since it was scanned; it is
// rescanned instead of being overwritten.
var errChangedLocally = errors.New("changed locally since the last scan")

// runPull brings the folder to the global state. It reports whether
// something could not be pulled and a retry is due.
func (f *folder) runPull(ctx context.Context) (retry bool) {
	cfg := f.config()
	if cfg.Type == db.SendOnly || cfg.Type == db.Encrypted {
		return false
	}
	need := f.set.Need()
	if len(need) == 0 {
		f.clearFailures() // what failed is needed no more
		f.dropPartials()
		return false
	}
	need, stopped := f.guardMassDelete(need, time.Now())
	if stopped || len(need) == 0 {
		return false
	}
	f.setState(StateSyncing)
	defer f.setState(StateIdle)
	defer f.ahead.Wait() // after the pull's writers, never beside them
	start := time.Now()
	defer func() { f.log.Debug("pull done", "items", len(need), "took", time.Since(start)) }()
	var total int64
	for _, r := range need {
		if !r.Deleted {
			total += r.Size
		}
	}
	f.mu.Lock()
	f.pullTotal, f.pullDone = total, 0
	f.mu.Unlock()

	var failed atomic.Int64
	var failMu sync.Mutex
	var lastFail error
	fail := func(r *index.Record, err error) {
		failed.Add(1)
		news := f.noteFailure(r.Name, err)
		if errors.Is(err, errChangedLocally) && news {
			// Once: a rescan that changes nothing would bring the same
			// pull back at once, and the two would loop for good.
			f.requestScan([]string{r.Name})
			f.log.Info("not replacing a file changed locally; rescanning it", "name", r.Name)
			return
		}
		if ctx.Err() != nil {
			return
		}
		failMu.Lock()
		lastFail = fmt.Errorf("%s: %w", r.Name, err)
		failMu.Unlock()
		if news {
			f.log.Warn("pull failed", "name", r.Name, "err", err)
		}
		f.e.opts.Events.Publish(events.ItemFinished{Folder: f.id, Name: r.Name, Action: itemAction(r), Error: err.Error()})
	}

	// files reuses need's array (a record is moved down only once read):
	// a second copy of 100,000 records was 12 MB of a node's peak.
	files := need[:0]
	var deletes []index.Record
	for i := range need {
		r := need[i]
		switch {
		case r.Deleted:
			deletes = append(deletes, r)
		case r.Type == index.Dir:
			if err := f.pullDir(ctx, &r); err != nil {
				fail(&r, err)
			} else {
				f.noteChanges([]index.Record{r}, false)
				f.e.opts.Events.Publish(events.ItemFinished{Folder: f.id, Name: r.Name, Action: events.ActionUpdate})
			}
		default:
			files = append(files, r)
		}
	}
	if len(files) > 0 {
		f.pullFiles(ctx, files, fail)
	}
	for i := range deletes {
		if ctx.Err() != nil {
			break
		}
		if err := f.pullDelete(ctx, &deletes[i]); err != nil {
			fail(&deletes[i], err)
		} else {
			if deletes[i].Type != index.Dir {
				f.deletions.note(time.Now(), 1)
			}
			f.noteChanges(deletes[i:i+1], false)
			f.e.opts.Events.Publish(events.ItemFinished{Folder: f.id, Name: deletes[i].Name, Action: events.ActionDelete})
		}
	}
	f.mu.Lock()
	f.allowMass = false
	f.mu.Unlock()
	if f.hasPartials() && len(f.set.Need()) == 0 {
		f.dropPartials()
	}
	switch {
	case failed.Load() == 0:
		f.setError(nil)
		f.clearFailures()
	case lastFail != nil:
		f.mu.Lock()
		f.pullFailed = true
		f.mu.Unlock()
		// Shown until a pull goes through: a full disk, a file no device
		// can serve, ... are not for the user to find in a log.
		f.setError(fmt.Errorf("%d of %d items could not be pulled; the last: %w", failed.Load(), len(need), lastFail))
	}
	return failed.Load() > 0
}

// noteFailure records that pulling name failed with err, and reports
// whether that is news: the same failure again, every retry, is not
// logged again.
func (f *folder) noteFailure(name string, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures == nil {
		f.failures = map[string]string{}
	}
	if f.failures[name] == err.Error() {
		return false
	}
	if len(f.failures) >= maxFailuresKept {
		clear(f.failures)
	}
	f.failures[name] = err.Error()
	return true
}

// clearFailures forgets the failures noted, and the error they showed,
// after a pull went through.
func (f *folder) clearFailures() {
	f.mu.Lock()
	f.failures = nil
	shown := f.pullFailed
	f.pullFailed = false
	f.mu.Unlock()
	if shown {
		f.setError(nil)
	}
}

// Failed pulls are retried after pullRetryMin, doubling up to
// pullRetryMax while they keep failing.
const (
	pullRetryMin = 10 * time.Second
	pullRetryMax = 10 * time.Minute
)

// retryBackoff is the delay before the next retry of a failing pull.
type retryBackoff struct {
	min, max, cur time.Duration
}

// next returns the delay for the next retry, longer each time.
func (b *retryBackoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur
}

// reset starts over after a pull went through.
func (b *retryBackoff) reset() { b.cur = 0 }

// notePartial remembers a partial file, to remove once nothing is needed.
func (f *folder) notePartial(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.partials == nil {
		f.partials = map[string]bool{}
	}
	f.partials[name] = true
}

// hasPartials reports whether a partial file is known, so that a pull
// computes what is still needed only when there is one to drop.
func (f *folder) hasPartials() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.partials) > 0
}

// dropPartials removes the partial files of pulls, once the folder needs
// nothing: a partial left by a pull that was given up (its file changed
// here, or was deleted by its peer) would else stay for a day. The
// folder's loop calls it between pulls, so none is being written.
func (f *folder) dropPartials() {
	f.mu.Lock()
	names := f.partials
	f.partials = nil
	f.mu.Unlock()
	for name := range names {
		if err := f.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.log.Warn("removing a partial file", "name", name, "err", err)
		}
	}
}

// maxFailuresKept bounds the failures a folder remembers for its log.
const maxFailuresKept = 10000

// itemAction is what pulling r does, for events.
func itemAction(r *index.Record) string {
	if r.Deleted {
		return events.ActionDelete
	}
	return events.ActionUpdate
}

// guardMassDelete decides, before anything is deleted, whether peers'
// deletions are a mass deletion: more likely a wiped disk on a peer than a
// wish. Deletions of local files are held while more keep arriving (a
// peer's rm -rf reaches this node in many index updates, and a slow one
// over minutes), then judged together with those applied in the last
// massDeleteWindow: more than half of the folder's files, and the folder
// stops before deleting any of them. The user lets it go on with
// AllowDeletes. It returns need without what is held, and whether the
// folder stopped.
func (f *folder) guardMassDelete(need []index.Record, now time.Time) ([]index.Record, bool) {
	f.mu.Lock()
	allowed := f.allowMass
	f.mu.Unlock()
	if allowed {
		return need, false
	}
	var dels int64
	for i := range need {
		if need[i].Deleted && need[i].Type != index.Dir {
			if l, ok := f.set.Local(need[i].Name); ok && !l.Deleted {
				dels++
			}
		}
	}
	h := &f.deletions
	if dels == 0 {
		h.first, h.changed, h.pending = time.Time{}, time.Time{}, 0
		return need, false
	}
	if h.first.IsZero() {
		h.first = now
	}
	if dels != h.pending {
		h.pending, h.changed = dels, now
	}
	settle := h.changed.Add(deleteQuiet)
	if last := h.first.Add(deleteHoldMax); last.Before(settle) {
		settle = last
	}
	if now.Before(settle) {
		// Still arriving: hold every deletion (a directory can go only
		// once its files have), and look again when they settle.
		time.AfterFunc(settle.Sub(now), f.requestPull)
		return slices.DeleteFunc(need, func(r index.Record) bool { return r.Deleted }), false
	}
	recent := h.appliedSince(now.Add(-massDeleteWindow))
	local := f.set.Counts().LocalFiles
	if base := local + recent; base < massDeleteMinF || (dels+recent)*2 <= base {
		h.first, h.changed, h.pending = time.Time{}, time.Time{}, 0
		return need, false
	}
	f.changeState(func() {
		f.blocked = true
		f.err = fmt.Sprintf("peers' changes would delete %d of %d files (%d more were deleted in the last hour); stopped before deleting any. If that is intended, run 'lockstep folder allow-deletes %s'", dels, local, recent, f.id)
	})
	f.log.Warn("stopped before a mass deletion", "deletes", dels, "files", local, "deleted recently", recent)
	return nil, true
}

// Mass deletion guard tuning.
const (
	// deleteQuiet: deletions are held until none new came for this long,
	deleteQuiet = 2 * time.Second
	// deleteHoldMax: or for this long since the first, while they trickle.
	deleteHoldMax = 2 * time.Minute
	// massDeleteWindow: deletions applied this recently count too.
	massDeleteWindow = time.Hour
)

// deletionHold is what the guard knows of peers' deletions. Only the
// folder's loop uses it.
type deletionHold struct {
	first, changed time.Time   // when deletions were first held, and their count last changed
	pending        int64       // deletions held
	applied        []time.Time // when deletions of local files were applied, oldest first
}

// note records n deletions applied at t.
func (h *deletionHold) note(t time.Time, n int) {
	for range n {
		h.applied = append(h.applied, t)
	}
}

// appliedSince drops what was applied before t and counts the rest.
func (h *deletionHold) appliedSince(t time.Time) int64 {
	i := 0
	for i < len(h.applied) && h.applied[i].Before(t) {
		i++
	}
	h.applied = h.applied[i:]
	return int64(len(h.applied))
}

// done is a pulled item ready to be put in place.
type done struct {
	rec   index.Record  // the record that becomes local
	tmp   string        // temp name to rename over rec.Name; "" for no rename
	inode uint64        // tmp's inode, where known (0: look it up once in place)
	local *index.Record // the local record when the pull started
}

// pullFiles fetches files and symlinks with several workers, and commits
// them in batches behind one durability barrier each.
func (f *folder) pullFiles(ctx context.Context, files []index.Record, fail func(*index.Record, error)) {
	sources := f.localBlocks(files)
	mem := semaphore.NewWeighted(maxBytesInAir)
	work := make(chan *index.Record)
	out := make(chan done, finisherBatch)
	// A worker reports each item it is through with; once ctx ends the
	// feeder stops reading, and reports are dropped.
	through := make(chan struct{}, f.e.opts.Workers)

	var fin sync.WaitGroup
	fin.Go(func() { f.finish(ctx, out, fail) })

	var wg sync.WaitGroup
	for range f.e.opts.Workers {
		wg.Go(func() {
			for r := range work {
				d, err := f.pullOne(ctx, r, sources, mem)
				if err != nil {
					fail(r, err)
				} else {
					out <- d
				}
				select {
				case through <- struct{}{}:
				case <-ctx.Done():
				}
			}
		})
	}
	f.feed(ctx, files, work, through)
	close(work)
	wg.Wait()
	close(out)
	fin.Wait()
}

// feed hands files to the workers, and while they work, takes in the files
// and symlinks that peers' index updates make needed meanwhile, so that
// they join this pull instead of waiting for it to end: a peer still
// scanning announces its files a batch at a time. A file already taken
// that changed again waits for the next pull (two workers never write one
// file), as do directories and deletions, and everything once a scan is
// waiting (local state goes first). feed returns when the workers are
// through with all it handed them, or ctx ends.
func (f *folder) feed(ctx context.Context, files []index.Record, work chan<- *index.Record, through <-chan struct{}) {
	taken := make(map[string]bool, len(files))
	busy := 0
	updates := f.pullCh
	again := false
	defer func() {
		if again {
			f.requestPull()
		}
	}()
	for {
		for len(files) > 0 {
			select {
			case work <- &files[0]:
				taken[files[0].Name] = true
				files = files[1:]
				busy++
			case <-through:
				busy--
			case <-ctx.Done():
				return
			}
		}
		if busy == 0 {
			return
		}
		select {
		case <-through:
			busy--
		case <-updates:
			if len(f.scanCh) > 0 {
				updates, again = nil, true
				continue
			}
			var left bool
			files, left = f.newNeeds(taken)
			again = again || left
		case <-ctx.Done():
			return
		}
	}
}

// newNeeds returns the needed files and symlinks not in taken, and whether
// other needs are left for the next pull.
func (f *folder) newNeeds(taken map[string]bool) (files []index.Record, left bool) {
	var size int64
	for _, r := range f.set.Need() {
		if taken[r.Name] || r.Deleted || r.Type == index.Dir {
			left = true
			continue
		}
		files = append(files, r)
		size += r.Size
	}
	f.mu.Lock()
	f.pullTotal += size
	f.mu.Unlock()
	return files, left
}

// pullOne prepares one file or symlink in a temp file.
func (f *folder) pullOne(ctx context.Context, r *index.Record, sources blockSources, mem *semaphore.Weighted) (done, error) {
	d := done{rec: *r}
	if l, ok := f.set.Local(r.Name); ok {
		d.local = &l
		if !l.Deleted && l.SameContent(r) {
			// Same content from another device: adopt its version only.
			d.rec.Inode = l.Inode
			return d, nil
		}
		if same, err := f.sameBytes(&l, r); err != nil {
			return d, err
		} else if same {
			// The same bytes, chunked otherwise (a recovered folder, a
			// device that joined with a copy): no conflict, nothing to
			// fetch. The merged version wins on both sides, so the other
			// device adopts it the same way.
			d.rec.Version = l.Version.Merge(r.Version)
			d.rec.Inode = l.Inode
			return d, nil
		}
	}
	if existing, err := f.fs.CaseConflict(r.Name); err != nil {
		return d, err
	} else if existing != "" {
		return d, fmt.Errorf("%q differs only in case from %q on this case-insensitive filesystem", r.Name, existing)
	}
	if r.Type == index.Symlink {
		tmp := tempName(r.Name)
		if err := f.inParent(r.Name, func() error { return f.fs.Symlink(r.Target, tmp) }); err != nil {
			return d, err
		}
		d.tmp = tmp
		return d, nil
	}
	// A file of several blocks is written to its partial file, which an
	// interrupted pull leaves behind for the next one to resume from.
	resumable := len(r.Blocks) > 1
	var file fsys.File
	var tmp string
	err := f.inParent(r.Name, func() (err error) {
		if resumable {
			file, tmp, err = f.fs.OpenPartial(r.Name)
		} else {
			file, tmp, err = f.fs.CreateTemp(r.Name)
		}
		return err
	})
	if err != nil {
		return d, err
	}
	if resumable {
		f.notePartial(tmp)
	}
	ok := false
	defer func() {
		if !ok {
			file.Close()
			if !resumable {
				f.fs.Remove(tmp)
			}
		}
	}()
	var have int64 // bytes an earlier pull may have written
	if resumable {
		if fi, err := file.Stat(); err == nil {
			have = fi.Size()
		}
	}
	// A new temp file is empty and the blocks tile the size (FromWire,
	// the scanner): only a partial one may be longer or shorter.
	if resumable {
		if err := file.Truncate(r.Size); err != nil {
			return d, err
		}
	}
	own := ownBlocks(d.local)
	// block puts one block in the file, from what it holds already (a
	// resumed pull), from local copies or from a peer.
	block := func(ctx context.Context, b index.Block) error {
		defer mem.Release(int64(b.Size))
		if b.Offset+int64(b.Size) <= have && f.written(file, b) {
			f.resumedBytes.Add(int64(b.Size))
			f.mu.Lock()
			f.pullDone += int64(b.Size)
			f.mu.Unlock()
			return nil
		}
		data, err := f.fetchBlock(ctx, r, b, sources, own)
		if err != nil {
			return err
		}
		_, err = file.WriteAt(data, b.Offset)
		putBlock(data)
		if err != nil {
			return err
		}
		// Each file's fsync then waits for less.
		f.ahead.Wrote(int64(b.Size))
		if r.Size >= earlyWritebackSize {
			fsys.StartWriteback(file, b.Offset, int(b.Size))
		}
		f.mu.Lock()
		f.pullDone += int64(b.Size)
		f.mu.Unlock()
		return nil
	}
	if len(r.Blocks) == 1 {
		// A small file's one block is fetched here: a goroutine of its
		// own, a new small stack grown for the hash each time, and the
		// group around it were 0.4 s of the receiving node's CPU at
		// 100,000 files.
		b := r.Blocks[0]
		if err := mem.Acquire(ctx, int64(b.Size)); err != nil {
			return d, err
		}
		if err := block(ctx, b); err != nil {
			return d, err
		}
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(blocksPerFile)
		for _, b := range r.Blocks {
			if err := mem.Acquire(gctx, int64(b.Size)); err != nil {
				break
			}
			g.Go(func() error { return block(gctx, b) })
		}
		if err := g.Wait(); err != nil {
			return d, err
		}
	}
	if err := ctx.Err(); err != nil {
		return d, err
	}
	// The inode the file keeps once renamed into place: asked of the open
	// file, not looked up by name after (100,000 lookups were a second of
	// a large pull's CPU).
	if fi, err := file.Stat(); err == nil {
		d.inode = inodeOf(fi)
	}
	set := fsys.SetModeTime(file, fs.FileMode(r.Mode&0o777), unixNano(r.ModTime))
	if err := file.Close(); err != nil {
		return d, err
	}
	if !set {
		if err := f.fs.Chmod(tmp, fs.FileMode(r.Mode&0o777)); err != nil {
			return d, err
		}
		if err := f.fs.Chtimes(tmp, unixNano(r.ModTime)); err != nil {
			return d, err
		}
	}
	ok = true
	d.tmp = tmp
	return d, nil
}

// inParent runs create, which makes a file beside name, and when name's
// directory is missing makes it and runs create again. The directory of
// most files pulled exists already: looking first cost a lookup per file.
func (f *folder) inParent(name string, create func() error) error {
	err := create()
	if dir := path.Dir(name); dir != "." && errors.Is(err, fs.ErrNotExist) {
		if err := f.fs.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		err = create()
	}
	return err
}

// sameBytes reports whether the local file l, concurrent with r, already
// holds exactly r's content; if so it takes r's mode and mtime, so that
// the record r describes it.
func (f *folder) sameBytes(l, r *index.Record) (bool, error) {
	if l.Deleted || l.Type != index.File || r.Type != index.File || l.Size != r.Size || l.Version.Compare(r.Version) != index.Concurrent {
		return false, nil
	}
	file, err := f.fs.Open(r.Name)
	if err != nil {
		return false, nil
	}
	defer file.Close()
	for _, b := range r.Blocks {
		if !f.written(file, b) {
			return false, nil
		}
	}
	cur, err := file.Stat()
	if err != nil || !matchesLocal(cur, true, l) {
		return false, nil // changed since it was scanned: a conflict after all
	}
	if err := f.fs.Chmod(r.Name, fs.FileMode(r.Mode&0o777)); err != nil {
		return false, err
	}
	return true, f.fs.Chtimes(r.Name, unixNano(r.ModTime))
}

// written reports whether the partial file holds block b already, as its
// hash says.
func (f *folder) written(file fsys.File, b index.Block) bool {
	buf := getBlock(int(b.Size))
	defer putBlock(buf)
	n, _ := file.ReadAt(buf, b.Offset)
	return n == len(buf) && chunk.HashOf(buf) == b.Hash
}

// ownBlocks maps the hashes of the blocks of l, the local version of the
// file being pulled, to their offsets. The pull's sources map only the
// files it started with; a file that joined it later (an edit announced
// while another file was pulled) still copies what its own older version
// holds, rather than fetch the whole file.
func ownBlocks(l *index.Record) map[chunk.Hash]int64 {
	if l == nil || l.Deleted || l.Type != index.File {
		return nil
	}
	own := make(map[chunk.Hash]int64, len(l.Blocks))
	for _, b := range l.Blocks {
		own[b.Hash] = b.Offset
	}
	return own
}

// fetchBlock gets a block's bytes from a local file that has them (sources,
// then the file's own older version at own), else from a peer that has the
// file's version; every source is hash-checked.
func (f *folder) fetchBlock(ctx context.Context, r *index.Record, b index.Block, sources blockSources, own map[chunk.Hash]int64) ([]byte, error) {
	var buf []byte
	local := sources[b.Hash]
	if off, ok := own[b.Hash]; ok {
		local = append(slices.Clip(local), blockSource{r.Name, off})
	}
	for _, src := range local {
		if buf == nil {
			buf = getBlock(int(b.Size))
		}
		if f.readLocal(src, buf) && chunk.HashOf(buf) == b.Hash {
			f.reusedBytes.Add(int64(b.Size))
			return buf, nil
		}
	}
	if buf != nil {
		putBlock(buf)
	}
	peers := f.set.Has(r.Name, r.Version)
	// Trusted peers first: a receiver's chunks cost opening, and a
	// receiver is the backup, often farther away.
	slices.SortStableFunc(peers, func(a, b crypt.DeviceID) int {
		ua, ub := f.untrusted(a), f.untrusted(b)
		switch {
		case ua == ub:
			return 0
		case ub:
			return -1
		}
		return 1
	})
	var lastErr error = errors.New("no connected device has it")
	for _, p := range peers {
		if !f.e.opts.Net.Connected(p) {
			continue
		}
		var data []byte
		var err error
		// A sealed chunk's plaintext was checked against b.Hash when it
		// was opened.
		verified := f.untrusted(p)
		if verified {
			data, err = f.e.opts.Sealed.SealedBlock(ctx, f.id, p, b)
		} else {
			data, err = f.e.opts.Net.RequestPeer(ctx, p, &protocol.Request{
				Folder: f.id, Name: r.Name, Offset: b.Offset, Size: b.Size, Hash: b.Hash[:],
			})
		}
		if err != nil {
			lastErr = err
			continue
		}
		if len(data) != int(b.Size) || (!verified && chunk.HashOf(data) != b.Hash) {
			lastErr = fmt.Errorf("block at %d from %s failed its hash check", b.Offset, p.Short())
			f.log.Warn("peer sent a bad block", "name", r.Name, "device", p.String())
			continue
		}
		f.pulledBytes.Add(int64(b.Size))
		f.pulledBlocks.Add(1)
		return data, nil
	}
	return nil, fmt.Errorf("block at offset %d: %w", b.Offset, lastErr)
}

// blockSource is where a block can be read locally.
type blockSource struct {
	name   string
	offset int64
}

type blockSources map[chunk.Hash][]blockSource

// localBlocks maps the hashes of files' blocks to where local files hold
// them, so renamed or shifted data is copied instead of transferred. At
// most a few places are kept per hash. Only the hashes files need are
// mapped: mapping every local block made each pull cost the whole folder
// (1.8 s for an edit to arrive at 1,000,000 files). Files that join the
// pull later find no local copies and are fetched.
func (f *folder) localBlocks(files []index.Record) blockSources {
	m := blockSources{}
	for i := range files {
		for _, b := range files[i].Blocks {
			m[b.Hash] = nil
		}
	}
	if len(m) == 0 {
		return m
	}
	f.set.EachLocal(func(r index.Record) error {
		if r.Type != index.File {
			return nil
		}
		for _, b := range r.Blocks {
			if srcs, ok := m[b.Hash]; ok && len(srcs) < 3 {
				m[b.Hash] = append(srcs, blockSource{r.Name, b.Offset})
			}
		}
		return nil
	})
	return m
}

func (f *folder) readLocal(src blockSource, buf []byte) bool {
	file, err := f.fs.Open(src.name)
	if err != nil {
		return false
	}
	defer file.Close()
	n, _ := file.ReadAt(buf, src.offset)
	return n == len(buf)
}

// readBlock serves a peer's request for a block of a local file.
func (f *folder) readBlock(req *protocol.Request) ([]byte, error) {
	if req.GetSize() == 0 || req.GetSize() > chunk.MaxSize || req.GetOffset() < 0 {
		return nil, protocol.ErrInvalidFile
	}
	if _, err := fromWireName(req.GetName()); err != nil {
		return nil, protocol.ErrInvalidFile
	}
	file, err := f.fs.Open(req.GetName())
	if err != nil {
		return nil, protocol.ErrNoSuchFile
	}
	defer file.Close()
	buf := getBlock(int(req.GetSize()))
	n, _ := file.ReadAt(buf, req.GetOffset())
	if n != len(buf) {
		putBlock(buf)
		return nil, protocol.ErrInvalidFile
	}
	// No hash check here: the requester verifies every block it receives
	// (and tries another source when the file changed since it was
	// indexed), so checking on this side too would only double the work.
	return buf, nil
}
