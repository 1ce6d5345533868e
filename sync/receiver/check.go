package receiver

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/check"
	"lockstep/sync/receiver/pack"
)

// CheckOptions tune Check.
type CheckOptions struct {
	// Grace: objects no row needs and temporary files last written less
	// than this long ago are not problems (an ingest may be writing them).
	// 0 is an hour, as for the temporary-file cleanup; negative is
	// ErrInvalidPolicy.
	Grace time.Duration
	// Progress, when set, is called with the store objects looked at so
	// far and about how many there are: the objects the database expects
	// (loose chunks, packs, envelope, meta) plus the log objects found,
	// never less than done. It is called every checkProgressEvery objects
	// and once at the end, from Check's goroutine.
	Progress func(done, total int)
	// Now is the time the grace period counts back from; zero: time.Now().
	Now time.Time
}

// checkPage is how many database rows a check reads at a time.
const checkPage = 1024

// checkProgressEvery is how often (in objects) Check calls Progress.
const checkProgressEvery = 1000

// maxTraced bounds the chunk IDs a check ties to the records needing
// them (about 100 bytes each), so a store that lost a million chunks is
// still checked in bounded memory; the problems past it go without the
// records.
const maxTraced = 1 << 16

// tempLister is the optional ability of a blob store to list the
// temporary files writes left below a prefix (local.Store has it).
type tempLister interface {
	Temps(ctx context.Context, prefix string, fn func(blob.Info) error) error
}

// tempListerOf finds the temp lister under any wrappers (retry, limit,
// metering): listing temporary files is a local look at the disk, which
// those layers have nothing to add to.
func tempListerOf(s blob.Store) (tempLister, bool) {
	tl, ok := blob.Bottom(s).(tempLister)
	return tl, ok
}

// Check compares what the store holds of an encrypted folder with what
// the database says it holds, without any key, and returns a report in
// mode "store" (Receiver empty). It fails with ErrNotHeld for a folder
// this node does not hold, ErrInvalidPolicy for a negative grace, and
// with the error of a store listing or database read it cannot do
// without; a store object it cannot read is a problem of kind Unreadable.
//
// What it reports, each problem naming the store key:
//
//   - Missing: a loose chunk, pack, log object, envelope or meta object
//     the database needs is not in the store. The detail of a chunk or
//     pack names the records needing it ("needed by 3 records (log 12,
//     40, 41)"); that of records in no log object, their log sequences.
//   - Damaged: an object is there but not as the database has it: a
//     loose chunk of another size, a pack that does not parse or places
//     a chunk elsewhere than its row, a log object that does not parse or
//     lacks records the database holds (or holds some it lacks), an
//     envelope other than the database's, a meta object that does not
//     parse, names another log or would rebuild another retention policy
//     or lower high-water marks, a name under c/, p/, log/ or envelope/
//     that a rebuild would refuse.
//   - Orphan: an object no row needs, last written before the grace
//     period (a pack an ingest of this process is filling never is): a
//     chunk or pack without a row, a superseded envelope, a log object
//     only of records the database lacks, an object outside the layout.
//   - Leftover: a temporary file a crashed write left, last written
//     before the grace period (stores that can list them: local.Store).
//   - Unreadable: an object listed that could not be read.
//
// Memory is bounded: the listing is merged, in key order, with pages of
// the database's rows in the same order (chunk IDs and pack IDs sort as
// their hex), holding one page, one log object and one pack's rows and
// index at a time, besides the pack usage (a few dozen bytes per pack)
// and at most maxTraced chunk IDs of problems.
//
// Check holds the folder's append lock throughout, as Prune does: no
// append, envelope put, prune, garbage collection or repack of the folder
// changes the database or the store's rows-backed objects meanwhile, so
// nothing is reported missing because one of them raced the check. An
// ingest goes on fetching chunks meanwhile (they have no rows yet: the
// grace period and its pending packs keep them from being orphans) and
// waits for its commit until the check ends; its peer waits too, its
// messages unacknowledged.
func (r *Receiver) Check(ctx context.Context, folderID string, o CheckOptions) (check.Report, error) {
	if o.Grace < 0 {
		return check.Report{}, fmt.Errorf("%w: negative grace %v", ErrInvalidPolicy, o.Grace)
	}
	if o.Grace == 0 {
		o.Grace = tempGrace
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	f, err := r.held(folderID)
	if err != nil {
		return check.Report{}, err
	}
	started := time.Now()
	f.append.Lock()
	defer f.append.Unlock()

	c := &storeCheck{r: r, f: f, ctx: ctx, cutoff: o.Now.Add(-o.Grace), progress: o.Progress,
		prefix: "r/" + f.fk + "/", traced: make(map[string][]int)}
	c.rep = check.Report{Folder: folderID, Mode: "store", Started: started, Problems: []check.Problem{}}
	if err := c.run(); err != nil {
		return check.Report{}, fmt.Errorf("checking the store of folder %q: %w", folderID, err)
	}
	c.rep.Duration = time.Since(started)
	return c.rep, nil
}

// storeCheck is one run of Check: the listing of the folder's objects,
// merged in key order with the database's rows.
type storeCheck struct {
	r        *Receiver
	f        *folder
	ctx      context.Context
	cutoff   time.Time
	progress func(done, total int)
	prefix   string // "r/<fk>/"
	rep      check.Report
	total    int // objects expected, for progress

	loose    looseRows
	packs    []db.PackUsage // the packs rows use, by ID
	nextPack int
	env      []byte // the database's envelope, nil for none
	envGen   int64
	envDone  bool // the envelope was found, or reported missing
	metaDone bool
	logs     logMerge

	// problems are held until the end, when the records pass adds which
	// records need the chunks of each; past check.MaxProblems they are
	// only counted (rep.Truncated).
	problems []heldProblem
	traced   map[string][]int // chunk ID -> indexes in problems
	nTraced  int
}

// heldProblem is a problem waiting for the records needing its chunks.
type heldProblem struct {
	p       check.Problem
	traced  bool    // its chunks are in storeCheck.traced
	needed  seqList // the records needing its chunks
	lastSeq int64   // the last record counted in needed
}

// run does the check: the listing merged with the rows, the temporary
// files, then the records pass.
func (c *storeCheck) run() error {
	usage, err := c.r.db.SealedPackUsage(c.ctx, c.f.id)
	if err != nil {
		return err
	}
	c.packs = usage
	stats, err := c.r.db.ReceiverStats(c.ctx, c.f.id)
	if err != nil {
		return err
	}
	c.rep.Records = int(stats.Records)
	c.rep.Chunks = int(stats.Chunks)
	c.total = int(stats.Chunks) + 1 // the chunks, less the packed ones, plus the packs and meta
	for _, u := range usage {
		c.total -= int(u.Chunks) - 1
	}
	switch env, gen, err := c.r.db.ReceiverEnvelope(c.ctx, c.f.id); {
	case errors.Is(err, db.ErrNotFound):
		c.envDone = true
	case err != nil:
		return err
	default:
		c.env, c.envGen = env, gen
		c.total++
	}
	c.loose = looseRows{db: c.r.db, folder: c.f.id}
	c.logs = logMerge{c: c, records: recordSeqs{db: c.r.db, folder: c.f.id}}

	err = c.r.store.List(c.ctx, c.prefix, func(info blob.Info) error {
		c.looked()
		if err := c.advance(info.Key); err != nil {
			return err
		}
		return c.object(info)
	})
	if err != nil {
		return fmt.Errorf("listing the store: %w", err)
	}
	if err := c.advance(c.prefix + "\xff"); err != nil {
		return err
	}
	if err := c.temps(); err != nil {
		return err
	}
	if c.progress != nil {
		c.progress(c.rep.Objects, max(c.total, c.rep.Objects))
	}
	return c.trace()
}

// looked counts one more object looked at.
func (c *storeCheck) looked() {
	c.rep.Objects++
	if c.progress != nil && c.rep.Objects%checkProgressEvery == 0 {
		c.progress(c.rep.Objects, max(c.total, c.rep.Objects))
	}
}

// advance reports missing what the database needs under keys before
// key, which the listing has passed.
func (c *storeCheck) advance(key string) error {
	for {
		row, err := c.loose.peek(c.ctx)
		if err != nil {
			return err
		}
		if row == nil || chunkKey(c.f.fk, row.ID) >= key {
			break
		}
		c.loose.pop()
		c.add(check.Problem{Kind: check.Missing, Object: chunkKey(c.f.fk, row.ID),
			Detail: fmt.Sprintf("chunk of %d bytes the database lists is not in the store", row.Size)}, row.ID)
	}
	if !c.envDone && envelopeKey(c.f.fk, c.envGen) < key {
		c.envDone = true
		c.add(check.Problem{Kind: check.Missing, Object: envelopeKey(c.f.fk, c.envGen),
			Detail: fmt.Sprintf("the folder key envelope of generation %d the database holds is not in the store", c.envGen)})
	}
	if logs := c.prefix + "log/"; key > logs && !strings.HasPrefix(key, logs) {
		if err := c.logs.finish(); err != nil {
			return err
		}
	}
	if !c.metaDone && metaKey(c.f.fk) < key {
		c.metaDone = true
		c.add(check.Problem{Kind: check.Missing, Object: metaKey(c.f.fk),
			Detail: "the meta object (folder, devices, log ID) is not in the store: a rebuild would skip the folder"})
	}
	for c.nextPack < len(c.packs) && packKey(c.f.fk, c.packs[c.nextPack].Pack) < key {
		u := c.packs[c.nextPack]
		c.nextPack++
		if err := c.missingPack(u); err != nil {
			return err
		}
	}
	return nil
}

// object checks one listed object, once advance has reported what the
// listing passed.
func (c *storeCheck) object(info blob.Info) error {
	rest := strings.TrimPrefix(info.Key, c.prefix)
	dir, name, found := strings.Cut(rest, "/")
	switch {
	case rest == "meta.json":
		c.metaDone = true
		return c.meta(info)
	case !found || strings.Contains(name, "/"):
		// Beside or below the layout's objects: Rebuild ignores it.
		c.orphan(info, "an object outside the receiver's layout")
	case dir == "c" && isHexID(name, db.SealedIDSize):
		c.chunk(info)
	case dir == "p" && isHexID(name, db.PackIDSize):
		return c.pack(info)
	case dir == "c" && !isHex(name, db.SealedIDSize) || dir == "p" && !isHex(name, db.PackIDSize):
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
			Detail: "not a chunk's or pack's name (the hex of its ID): a rebuild would refuse the store"})
	case dir == "log":
		return c.logs.object(info)
	case dir == "envelope":
		c.envelope(info, name)
	default:
		c.orphan(info, "an object outside the receiver's layout")
	}
	return nil
}

// isHexID reports whether name is the lower-case hex of n bytes, as the
// store keys of chunks and packs are written.
func isHexID(name string, n int) bool {
	return isHex(name, n) && strings.ToLower(name) == name
}

// isHex reports whether name is hex of n bytes in either case, as
// Rebuild reads the names of chunks and packs.
func isHex(name string, n int) bool {
	id, err := hex.DecodeString(name)
	return err == nil && len(id) == n
}

// orphan reports info as an object no row needs, if it was last written
// before the grace period.
func (c *storeCheck) orphan(info blob.Info, what string) {
	if info.ModTime.Before(c.cutoff) {
		c.add(check.Problem{Kind: check.Orphan, Object: info.Key,
			Detail: fmt.Sprintf("%s, %d bytes, last written %s", what, info.Size, info.ModTime.UTC().Format(time.RFC3339))})
	}
}

// unreadable reports that the object key could not be read, unless the
// check's context ended (then it returns that).
func (c *storeCheck) unreadable(key string, err error) error {
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	c.add(check.Problem{Kind: check.Unreadable, Object: key, Detail: err.Error()})
	return nil
}

// chunk checks a loose chunk object against its row.
func (c *storeCheck) chunk(info blob.Info) {
	row, err := c.loose.peek(c.ctx)
	if err == nil && row != nil && chunkKey(c.f.fk, row.ID) == info.Key {
		c.loose.pop()
		if info.Size != row.Size {
			c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
				Detail: fmt.Sprintf("chunk of size %d, database says %d", info.Size, row.Size)}, row.ID)
		}
		return
	}
	// A fetch in progress (or one whose commit failed) stores chunks
	// before their rows; so does an ingest of a chunk the database
	// places in a pack.
	c.orphan(info, "a chunk no row places here")
}

// missingPack reports the pack u the listing lacks.
func (c *storeCheck) missingPack(u db.PackUsage) error {
	rows, err := c.r.db.PackedChunks(c.ctx, c.f.id, u.Pack)
	if err != nil {
		return err
	}
	c.add(check.Problem{Kind: check.Missing, Object: packKey(c.f.fk, u.Pack),
		Detail: fmt.Sprintf("pack of the %d chunks (%d bytes) the database places there is not in the store", u.Chunks, u.LiveBytes)},
		rowIDs(rows)...)
	return nil
}

// pack checks a pack object against the rows placing chunks in it.
//
// Only the pack's index (its footer and trailer: two range reads) is
// read, never the chunk bodies: without the key a receiver can check a
// body for nothing but its length, and the index pins each chunk's ID,
// offset and length, with the bodies filling the pack exactly up to the
// trailer (package pack checks that). So a pack whose index parses and
// agrees with every row holds each body at the range its row says.
func (c *storeCheck) pack(info blob.Info) error {
	id, _ := packIDOf(info.Key)
	if c.nextPack >= len(c.packs) || !bytes.Equal(c.packs[c.nextPack].Pack, id) {
		if !c.f.isPending(id) {
			c.orphan(info, "a pack no row places a chunk in")
		}
		return nil
	}
	c.nextPack++
	rows, err := c.r.db.PackedChunks(c.ctx, c.f.id, id)
	if err != nil {
		return err
	}
	entries, err := pack.ReadIndex(c.ctx, c.r.store, info.Key, info.Size)
	switch {
	case errors.Is(err, blob.ErrNotExist):
		c.add(check.Problem{Kind: check.Missing, Object: info.Key,
			Detail: fmt.Sprintf("pack of the %d chunks the database places there went while it was checked", len(rows))}, rowIDs(rows)...)
		return nil
	case errors.Is(err, pack.ErrInvalid):
		var end int64
		for _, r := range rows {
			end = max(end, r.Offset+r.Size)
		}
		detail := fmt.Sprintf("pack of size %d does not parse: %v", info.Size, err)
		if need := end + int64(len(rows)*pack.EntrySize+pack.FooterSize); info.Size < need {
			detail = fmt.Sprintf("pack of size %d, database says at least %d (its %d chunks end at byte %d, then their index); it does not parse: %v",
				info.Size, need, len(rows), end, err)
		}
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key, Detail: detail}, rowIDs(rows)...)
		return nil
	case err != nil:
		return c.unreadable(info.Key, err)
	}
	c.rep.BytesRead += int64(len(entries)*pack.EntrySize + pack.FooterSize)
	at := make(map[string]pack.Entry, len(entries))
	for _, e := range entries {
		at[string(e.ID)] = e
	}
	var bad [][]byte
	var first string
	for _, r := range rows {
		e, ok := at[string(r.ID)]
		if ok && e.Offset == r.Offset && e.Length == r.Size {
			continue
		}
		if first == "" {
			first = fmt.Sprintf("chunk %x: database says %d bytes at %d, pack has ", r.ID, r.Size, r.Offset)
			if ok {
				first += fmt.Sprintf("%d bytes at %d", e.Length, e.Offset)
			} else {
				first += "no such chunk"
			}
		}
		bad = append(bad, r.ID)
	}
	if len(bad) > 0 {
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
			Detail: fmt.Sprintf("%d of the %d chunks the database places in the pack are not there as it says (%s)", len(bad), len(rows), first)},
			bad...)
	}
	return nil
}

// rowIDs returns the IDs of rows.
func rowIDs(rows []db.SealedChunk) [][]byte {
	ids := make([][]byte, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}
