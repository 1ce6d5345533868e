package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

// ErrInvalidPolicy means a retention policy or prune option has a
// negative number.
var ErrInvalidPolicy = errors.New("invalid retention policy")

// Policy is a folder's retention on a receiver. The zero Policy keeps
// everything.
//
// Per file (file key), records are ordered newest first by stored time
// (ties by log sequence) and taken together into versions: every device
// sharing the folder uploads its own copy of a version (another origin
// and counter, the same file key, chunk list and deletion flag), so a run
// of adjacent records with the same deletion flag and chunk list, no two
// of one origin, is one version, as old as its newest copy (see
// versionsOf). The newest version is always kept, unless it is a
// deletion older than KeepDeletedDays (when > 0): then every version of
// the file goes. Of the rest a version is kept if it is among the
// KeepLast newest, or it is the newest in its UTC hour / day / ISO week /
// month / year and that bucket is among the KeepHourly / KeepDaily / ...
// newest buckets holding a version. A version kept keeps every copy, one
// dropped drops every copy. With every Keep count 0 all versions are kept
// (only KeepDeletedDays applies).
type Policy struct {
	KeepLast, KeepHourly, KeepDaily, KeepWeekly, KeepMonthly, KeepYearly int
	KeepDeletedDays                                                      int // 0: deleted files are kept like any other
}

// PruneOptions tune Prune.
type PruneOptions struct {
	DryRun bool
	Grace  time.Duration // chunks stored less than this long ago stay even unreferenced (0: none; the CLI's default is 1h)
	Now    time.Time     // zero: time.Now()
	// Try, in a dry run only, is a policy to try instead of the
	// folder's: what it would drop, before it is saved.
	Try *Policy
}

// PruneResult is what a Prune dropped (or would drop, in a dry run).
type PruneResult struct {
	Records int   // records dropped (or that would be, in a dry run): each device's copy of a version counts
	Files   int   // files (file keys) that lost every version
	Chunks  int   // chunks deleted
	Bytes   int64 // bytes of chunks deleted
	Kept    int   // records kept, counted like Records
	// Packs is how many packs were deleted: none of their chunks is
	// still held (or none ever was: an ingest's pack whose commit never
	// came), and they were stored before the grace period.
	Packs int
	// Repacked is how many packs were repacked: their held chunks took
	// less than half their size, and were copied into new packs.
	Repacked int
}

func (p Policy) check() error {
	for _, n := range []int{p.KeepLast, p.KeepHourly, p.KeepDaily, p.KeepWeekly, p.KeepMonthly, p.KeepYearly, p.KeepDeletedDays} {
		if n < 0 {
			return fmt.Errorf("%w: negative number %d", ErrInvalidPolicy, n)
		}
	}
	return nil
}

// keepsAll reports whether p keeps every version of a file that is not
// an expired deletion.
func (p Policy) keepsAll() bool {
	return p.KeepLast == 0 && p.KeepHourly == 0 && p.KeepDaily == 0 && p.KeepWeekly == 0 &&
		p.KeepMonthly == 0 && p.KeepYearly == 0
}

// SetRetention sets the retention policy of an encrypted folder: in the
// database and in the folder's meta object, so Rebuild restores it. It
// fails with ErrNotHeld or ErrInvalidPolicy.
func (r *Receiver) SetRetention(ctx context.Context, folderID string, p Policy) error {
	if err := p.check(); err != nil {
		return err
	}
	f, err := r.held(folderID)
	if err != nil {
		return err
	}
	f.append.Lock()
	defer f.append.Unlock()
	if err := r.db.SetReceiverRetention(ctx, folderID, db.ReceiverRetention(p)); err != nil {
		return err
	}
	return r.updateMeta(ctx, f, func(m *meta) { m.Retention = metaRetentionOf(p) })
}

// Retention returns the retention policy of an encrypted folder, or
// ErrNotHeld.
func (r *Receiver) Retention(ctx context.Context, folderID string) (Policy, error) {
	if _, err := r.held(folderID); err != nil {
		return Policy{}, err
	}
	p, err := r.db.ReceiverRetention(ctx, folderID)
	return Policy(p), err
}

// held returns the folder if this node holds it.
func (r *Receiver) held(folderID string) (*folder, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.folders[folderID]
	if !ok {
		return nil, fmt.Errorf("folder %q: %w", folderID, ErrNotHeld)
	}
	return f, nil
}

// updateMeta applies change to f's meta object and writes it to the
// store. The caller holds f.append.
func (r *Receiver) updateMeta(ctx context.Context, f *folder, change func(*meta)) error {
	m, err := parseMeta(f.fk, f.metaCopy(r), r.storeKey)
	if err != nil {
		return err
	}
	change(m)
	plain := m.encode()
	data, err := metaForStore(f.fk, plain, r.storeKey)
	if err != nil {
		return err
	}
	if err := r.store.Put(ctx, metaKey(f.fk), bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("writing meta: %w", err)
	}
	r.mu.Lock()
	f.meta = plain
	r.mu.Unlock()
	return nil
}

// Prune applies the folder's retention policy now, then collects garbage:
// chunks no kept record references whose stored time is older than
// o.Now - o.Grace. It holds the folder's append lock throughout, so it
// never races an ingest. A dry run changes nothing and returns the same
// figures a real run would.
//
// Order, so a crash never resurrects what went nor loses what stays: the
// meta object with the raised high-water marks, the log objects rewritten
// without the dropped records (or deleted when empty), the database's
// records, then per chunk its blob (none for a packed chunk) and last the
// chunk rows; then the packs no row uses any more are deleted, and those
// below half live are repacked (see repack).
func (r *Receiver) Prune(ctx context.Context, folderID string, o PruneOptions) (PruneResult, error) {
	if o.Grace < 0 {
		return PruneResult{}, fmt.Errorf("%w: negative grace %v", ErrInvalidPolicy, o.Grace)
	}
	if o.Try != nil && !o.DryRun {
		return PruneResult{}, fmt.Errorf("%w: a policy to try is only for a dry run", ErrInvalidPolicy)
	}
	if o.Try != nil {
		if err := o.Try.check(); err != nil {
			return PruneResult{}, err
		}
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	f, err := r.held(folderID)
	if err != nil {
		return PruneResult{}, err
	}
	f.append.Lock()
	defer f.append.Unlock()

	stored, err := r.db.ReceiverRetention(ctx, folderID)
	if err != nil {
		return PruneResult{}, err
	}
	p := Policy(stored)
	if o.Try != nil {
		p = *o.Try
	}
	pl, err := r.plan(ctx, folderID, p, o.Now)
	if err != nil {
		return PruneResult{}, err
	}
	cutoff := o.Now.Add(-o.Grace)
	garbage, res, err := r.garbage(ctx, folderID, pl, cutoff)
	if err != nil {
		return res, err
	}
	pp, err := r.planPacks(ctx, f, garbage, cutoff)
	if err != nil {
		return res, err
	}
	res.Packs, res.Repacked = len(pp.drop), len(pp.repack)
	if o.DryRun {
		return res, nil
	}
	if len(pl.dropped) > 0 {
		if err := r.dropRecords(ctx, f, pl); err != nil {
			return res, err
		}
	}
	if len(garbage) > 0 {
		if err := r.collect(ctx, f, garbage); err != nil {
			return res, err
		}
	}
	if err := r.collectPacks(ctx, f, pp); err != nil {
		return res, err
	}
	r.log.Info("pruned encrypted folder", "folder", folderID, "records", res.Records, "files", res.Files,
		"chunks", res.Chunks, "bytes", res.Bytes, "kept", res.Kept, "packs", res.Packs, "repacked", res.Repacked)
	return res, nil
}

// prunePlan is what retention drops of a folder.
type prunePlan struct {
	dropped    []int64           // log sequences, ascending
	files      int               // file keys losing every version
	kept       int               // versions kept
	referenced map[string]bool   // chunk IDs kept records reference
	counters   map[string]uint64 // highest counter per origin, of every record
	maxSeq     int64             // highest log sequence of every record
}

// plan reads every version of the folder and decides which stay under p.
func (r *Receiver) plan(ctx context.Context, folderID string, p Policy, now time.Time) (*prunePlan, error) {
	pl := &prunePlan{referenced: make(map[string]bool), counters: make(map[string]uint64)}
	var file []db.SealedRecord
	flush := func() {
		if len(file) == 0 {
			return
		}
		keep := p.keeps(file, now)
		all := true
		for i, v := range file {
			if keep[i] {
				all = false
				pl.kept++
				for off := 0; off < len(v.Chunks); off += db.SealedIDSize {
					pl.referenced[string(v.Chunks[off:off+db.SealedIDSize])] = true
				}
			} else {
				pl.dropped = append(pl.dropped, v.Seq)
			}
		}
		if all {
			pl.files++
		}
		file = file[:0]
	}
	err := r.db.SealedVersions(ctx, folderID, func(v db.SealedRecord) error {
		if len(file) > 0 && !bytes.Equal(file[0].FileKey, v.FileKey) {
			flush()
		}
		file = append(file, v)
		pl.counters[string(v.Origin)] = max(pl.counters[string(v.Origin)], v.Counter)
		pl.maxSeq = max(pl.maxSeq, v.Seq)
		return nil
	})
	if err != nil {
		return nil, err
	}
	flush()
	sort.Slice(pl.dropped, func(i, j int) bool { return pl.dropped[i] < pl.dropped[j] })
	return pl, nil
}

// keeps returns which of one file's records (newest first) p keeps at
// now: every copy of the versions it keeps (see Policy).
func (p Policy) keeps(recs []db.SealedRecord, now time.Time) []bool {
	keep := make([]bool, len(recs))
	vs := versionsOf(recs)
	if newest := recs[0]; newest.Deleted && p.KeepDeletedDays > 0 &&
		newest.StoredAt.Before(now.Add(-time.Duration(p.KeepDeletedDays)*24*time.Hour)) {
		return keep
	}
	kept := make([]bool, len(vs))
	if p.keepsAll() {
		for i := range kept {
			kept[i] = true
		}
	} else {
		p.keepVersions(recs, vs, kept)
	}
	for i, start := range vs {
		end := len(recs)
		if i+1 < len(vs) {
			end = vs[i+1]
		}
		for j := start; j < end; j++ {
			keep[j] = kept[i]
		}
	}
	return keep
}

// keepVersions marks in kept the versions p's Keep counts keep: vs holds
// the index in recs of each version's newest copy, newest version first.
func (p Policy) keepVersions(recs []db.SealedRecord, vs []int, kept []bool) {
	kept[0] = true
	type bucketKind struct {
		count int
		of    func(time.Time) int
		last  int
	}
	kinds := []*bucketKind{
		{count: p.KeepHourly, of: func(t time.Time) int { return dayOf(t)*100 + t.Hour() }},
		{count: p.KeepDaily, of: dayOf},
		{count: p.KeepWeekly, of: func(t time.Time) int { y, w := t.ISOWeek(); return y*100 + w }},
		{count: p.KeepMonthly, of: func(t time.Time) int { return t.Year()*100 + int(t.Month()) }},
		{count: p.KeepYearly, of: func(t time.Time) int { return t.Year() }},
	}
	for _, k := range kinds {
		k.last = -1
	}
	for i, start := range vs {
		t := recs[start].StoredAt.UTC()
		if i < p.KeepLast {
			kept[i] = true
		}
		for _, k := range kinds {
			if k.count == 0 {
				continue
			}
			if b := k.of(t); b != k.last {
				k.last = b
				k.count--
				kept[i] = true
			}
		}
	}
}

// versionsOf returns where each version of one file's records (newest
// first) starts. Without the key a receiver sees of a record only its
// file key, origin, counter, chunk list, deletion flag and stored time;
// the copies devices upload of one version have the same chunk list and
// deletion flag and differ in origin. So a version is a run of adjacent
// records with the same deletion flag and chunk list in which no origin
// appears twice: two records of one device are two versions (a change of
// metadata alone keeps the chunk list), and a content that comes back
// after another is a new version. Copies that a device uploads only after
// a later version arrived are taken for versions of their own, which
// keeps more, never less.
func versionsOf(recs []db.SealedRecord) []int {
	var starts []int
	var origins map[string]bool
	for i, r := range recs {
		if len(starts) > 0 {
			first := recs[starts[len(starts)-1]]
			if r.Deleted == first.Deleted && bytes.Equal(r.Chunks, first.Chunks) && !origins[string(r.Origin)] {
				origins[string(r.Origin)] = true
				continue
			}
		}
		starts = append(starts, i)
		origins = map[string]bool{string(r.Origin): true}
	}
	return starts
}

// dayOf numbers t's UTC day.
func dayOf(t time.Time) int { return t.Year()*10000 + int(t.Month())*100 + t.Day() }

// garbage returns the chunks that go once pl's records are dropped (those
// no kept record references stored before cutoff) and the prune's figures.
func (r *Receiver) garbage(ctx context.Context, folderID string, pl *prunePlan, cutoff time.Time) ([]db.SealedChunk, PruneResult, error) {
	res := PruneResult{Records: len(pl.dropped), Files: pl.files, Kept: pl.kept}
	var out []db.SealedChunk
	err := r.db.SealedChunks(ctx, folderID, func(c db.SealedChunk) error {
		if !pl.referenced[string(c.ID)] && c.StoredAt.Before(cutoff) {
			out = append(out, c)
			res.Chunks++
			res.Bytes += c.Size
		}
		return nil
	})
	return out, res, err
}

// dropRecords takes pl's dropped records out of the store's log, then out
// of the database, raising the high-water marks first in both.
func (r *Receiver) dropRecords(ctx context.Context, f *folder, pl *prunePlan) error {
	hw, err := r.db.ReceiverHighWater(ctx, f.id)
	if err != nil {
		return err
	}
	last, err := r.db.ReceiverLastSequence(ctx, f.id)
	if err != nil {
		return err
	}
	hw.Sequence = max(hw.Sequence, last, pl.maxSeq)
	hw.Counters = mergeCounters(hw.Counters, pl.counters)
	if err := r.updateMeta(ctx, f, func(m *meta) { m.HighWater = metaHighWaterOf(hw) }); err != nil {
		return err
	}
	if err := r.rewriteLogs(ctx, f, pl.dropped); err != nil {
		return err
	}
	return r.db.PruneSealed(ctx, f.id, pl.dropped, hw)
}

// mergeCounters returns the per-origin maximum of marks and counters,
// ordered by origin.
func mergeCounters(marks []db.OriginCounter, counters map[string]uint64) []db.OriginCounter {
	all := make(map[string]uint64, len(marks)+len(counters))
	for _, c := range marks {
		all[string(c.Origin)] = c.Counter
	}
	for o, c := range counters {
		all[o] = max(all[o], c)
	}
	out := make([]db.OriginCounter, 0, len(all))
	for o, c := range all {
		out = append(out, db.OriginCounter{Origin: []byte(o), Counter: c})
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Origin, out[j].Origin) < 0 })
	return out
}

// rewriteLogs rewrites every log object of f holding one of the log
// sequences dropped (ascending) without those records, under the same
// key, and deletes those left empty.
func (r *Receiver) rewriteLogs(ctx context.Context, f *folder, dropped []int64) error {
	var firsts []int64
	err := r.store.List(ctx, "r/"+f.fk+"/log/", func(info blob.Info) error {
		if first, err := logFirst(info.Key); err == nil {
			firsts = append(firsts, first)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the log: %w", err)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	// Group the dropped sequences by the object holding them: the one
	// with the greatest first sequence at or below each.
	byObject := make(map[int64]map[int64]bool)
	var order []int64
	for _, s := range dropped {
		i := sort.Search(len(firsts), func(i int) bool { return firsts[i] > s }) - 1
		if i < 0 {
			return fmt.Errorf("%w: no log object holds record %d", ErrCorrupt, s)
		}
		if byObject[firsts[i]] == nil {
			byObject[firsts[i]] = make(map[int64]bool)
			order = append(order, firsts[i])
		}
		byObject[firsts[i]][s] = true
	}
	for _, first := range order {
		if err := r.rewriteLog(ctx, f, logKey(f.fk, first), byObject[first]); err != nil {
			return err
		}
	}
	return nil
}

// rewriteLog rewrites the log object key without the records drop names.
func (r *Receiver) rewriteLog(ctx context.Context, f *folder, key string, drop map[int64]bool) error {
	data, err := getLimited(ctx, r.store, key, maxLogSize)
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	wire, err := parseLog(logFolder(f.fk, f.id), key, data)
	if err != nil {
		return err
	}
	var rest []*protocol.SealedRecord
	for _, w := range wire {
		if !drop[w.GetSequence()] {
			rest = append(rest, w)
		}
	}
	if len(rest) == len(wire) {
		return nil
	}
	if len(rest) == 0 {
		if err := r.store.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotExist) {
			return fmt.Errorf("deleting %s: %w", key, err)
		}
		return nil
	}
	obj, err := proto.Marshal(&protocol.SealedIndex{Folder: logFolder(f.fk, f.id), Records: rest})
	if err != nil {
		return fmt.Errorf("encoding %s: %w", key, err)
	}
	if err := r.store.Put(ctx, key, bytes.NewReader(obj), int64(len(obj))); err != nil {
		return fmt.Errorf("rewriting %s: %w", key, err)
	}
	return nil
}

// collect deletes the chunks garbage from the store, then their rows. An
// ingest that decided before the lock that it need not fetch one of them
// notices by f.collected and starts over.
func (r *Receiver) collect(ctx context.Context, f *folder, garbage []db.SealedChunk) error {
	// After the rows are gone: an ingest that read the count before saw
	// them (or not) and starts over; one that reads it after sees them
	// gone and fetches.
	defer f.collected.Add(1)
	ids := make([][]byte, 0, len(garbage))
	var keys []string
	byKey := map[string][]byte{}
	for _, c := range garbage {
		if c.Pack != nil {
			// Its bytes go with its pack (collectPacks).
			ids = append(ids, c.ID)
			continue
		}
		k := chunkKey(f.fk, c.ID)
		keys, byKey[k] = append(keys, k), c.ID
	}
	// In batches: on S3 one request deletes a thousand.
	deleted, err := blob.DeleteBatch(ctx, r.store, keys)
	for _, k := range deleted {
		ids = append(ids, byKey[k])
	}
	// Rows of the chunks gone go; those of chunks that may still be
	// there stay, for the next collection.
	if derr := r.db.DeleteSealedChunks(ctx, f.id, ids); derr != nil || err != nil {
		if err != nil {
			err = fmt.Errorf("deleting %d of %d chunks: %w", len(keys)-len(deleted), len(keys), err)
		}
		return errors.Join(err, derr)
	}
	return nil
}
