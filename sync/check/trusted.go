package check

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/sealed"
)

// A trusted device's check of one receiver: read the receiver's whole log
// and chunk list in pages (protocol REQUEST_KIND_LOG_READ and
// _CHUNK_LIST), open every record, hold the log against what this device
// knows of it and against the checkpoints it carries, and hold every kept
// version's chunks against the list; with read-data, fetch chunks and open
// them. Nothing is written anywhere.

// Requester sends one request to the receiver being checked and returns
// the answer's data.
type Requester func(ctx context.Context, req *protocol.Request) ([]byte, error)

// Known is what this device knows of the receiver's log from reading it
// before (db.ReceiverView and the log ID), and of its own records.
type Known struct {
	// LogID is the receiver's log ID as last seen; 0 if never.
	LogID uint64
	// Cursor is the highest log sequence this device has read.
	Cursor int64
	// Held is the highest of this device's counters the receiver has
	// served back: everything this device sealed up to it was stored.
	Held int64
	// LocalSequence is the highest counter this device ever sealed.
	LocalSequence int64
	// Own calls fn for each of this device's current local records that
	// the receiver must hold (those with Sequence <= Held, not local-only).
	Own func(fn func(index.Record))
	// Seen calls fn for each record this device read in the receiver's
	// log before: the newest version of each name, with its log sequence
	// as Sequence. A version not deleted must still be there, or a newer
	// one of its name: retention never drops the newest version of a
	// file that exists.
	Seen func(fn func(index.Record))
}

// ReadData says which chunks a check fetches and opens. The zero value
// reads none (a metadata check).
type ReadData struct {
	All bool
	// Percent (0 to 100) of the chunks, or Bytes of sealed data, chosen at
	// random anew on each run; the larger of the two wins.
	Percent float64
	Bytes   int64
}

// mode names r for Report.Mode.
func (r ReadData) mode() string {
	switch {
	case r.All:
		return "read-data"
	case r.Percent > 0 || r.Bytes > 0:
		return "read-data-subset"
	}
	return "metadata"
}

// Progress is how far a check has got.
type Progress struct {
	Phase       string // "log", "chunks", "data"
	Records     int
	Chunks      int
	ChunksTotal int
	Bytes       int64
	BytesTotal  int64
}

// Options say what to check.
type Options struct {
	Folder   string
	Receiver crypt.DeviceID
	Self     crypt.DeviceID
	Keys     *crypt.Keys
	Known    Known
	ReadData ReadData
	Progress func(Progress)
	// Repair, when set, is asked for a sealed body of each chunk the
	// check found missing or damaged on a receiver that still lists it,
	// of the size the receiver lists: the body is sent to the receiver
	// in its place (REQUEST_KIND_CHUNK_REPAIR). It returns where the
	// body came from, or an error saying why there is none.
	Repair func(ctx context.Context, id crypt.ChunkID, hash [32]byte, size int64) (body []byte, from string, err error)
}

// Page sizes asked of the receiver.
const (
	logPageSize   = 4 << 20
	chunkPageSize = 1 << 20
	// fetchWorkers bounds the chunk requests in flight with read-data.
	fetchWorkers = 8
)

// version is one kept version of a file, as problems name it.
type version struct {
	path, id string
}

// need is what the kept versions need of one chunk.
type need struct {
	hash     [32]byte
	plain    int // plaintext size
	versions []int32
	size     int64 // sealed size on the receiver; 0 when not listed
}

// trustedCheck is one check in progress.
type trustedCheck struct {
	opts     Options
	req      Requester
	rep      *Report
	versions []version
	needs    map[crypt.ChunkID]*need
	bad      map[crypt.ChunkID]bool // found missing or damaged
	// whole holds the damaged chunks the receiver served at their full
	// size: it replaces no copy it reads whole (a device could overwrite
	// history so), so they are not sent again.
	whole  map[crypt.ChunkID]bool
	prover *sealed.Prover
	// own holds this device's records in the log: counter per file key
	// and counter, to find the acknowledged ones missing.
	own  map[crypt.FileKey][]uint64
	best map[crypt.FileKey][]index.Record // every opened record per name
	// seqs holds the log sequence of every record read, and newest the
	// highest sequence per file key, for the records seen before.
	seqs   map[int64]bool
	newest map[crypt.FileKey]int64
	// pending holds the problems of chunks, reported once the log has
	// been read again (recheck).
	pending []Problem
}

// Trusted checks one receiver of a folder through req. The error is for a
// check that could not run (the receiver unreachable, an answer that does
// not decode); what it found wrong is in the report.
func Trusted(ctx context.Context, req Requester, opts Options) (Report, error) {
	start := time.Now()
	c := &trustedCheck{
		opts: opts, req: req,
		rep:    &Report{Folder: opts.Folder, Receiver: opts.Receiver.String(), Mode: opts.ReadData.mode(), Started: start, Problems: []Problem{}},
		needs:  map[crypt.ChunkID]*need{},
		bad:    map[crypt.ChunkID]bool{},
		whole:  map[crypt.ChunkID]bool{},
		prover: sealed.NewProver(opts.Keys),
		own:    map[crypt.FileKey][]uint64{},
		best:   map[crypt.FileKey][]index.Record{},
		seqs:   map[int64]bool{},
		newest: map[crypt.FileKey]int64{},
	}
	err := c.run(ctx)
	c.rep.Duration = time.Since(start)
	return *c.rep, err
}

func (c *trustedCheck) run(ctx context.Context) error {
	if err := c.readLog(ctx); err != nil {
		return err
	}
	c.checkProofs()
	c.checkOwn()
	c.checkSeen()
	if err := c.readChunkList(ctx); err != nil {
		return err
	}
	c.checkChunks()
	if err := c.readData(ctx); err != nil {
		return err
	}
	if err := c.recheck(ctx); err != nil {
		return err
	}
	return c.repair(ctx)
}

func (c *trustedCheck) progress(p Progress) {
	if c.opts.Progress != nil {
		c.opts.Progress(p)
	}
}

// readLog reads the whole log, opening every record. A receiver must make
// progress: each page with More starts after the last and adds records,
// none above the log's end as the first page gave it, and the log keeps
// its ID; else the check stops with ErrHostile, so that a receiver can't
// keep a check (and the folder's checks after it) running forever.
func (c *trustedCheck) readLog(ctx context.Context) error {
	var logID uint64
	var last, prev int64
	first := true
	seen := map[string]int64{} // origin‖counter → sequence, for forks
	err := c.pages(ctx, func(page *protocol.LogPage) error {
		if first {
			logID, last, first = page.GetLogId(), page.GetLastSequence(), false
		} else if page.GetLogId() != logID {
			return fmt.Errorf("%w: the log's ID changed during the check", ErrHostile)
		}
		for _, sr := range page.GetRecords() {
			if sr.GetSequence() > last {
				return fmt.Errorf("%w: a record at log %d, past the log's end %d", ErrHostile, sr.GetSequence(), last)
			}
			if sr.GetSequence() <= prev {
				c.rep.Add(Problem{Kind: Damaged, Object: logObject(sr.GetSequence()), Detail: fmt.Sprintf("log out of order: sequence %d after %d", sr.GetSequence(), prev)})
				continue
			}
			prev = sr.GetSequence()
			key := string(sr.GetOrigin()) + strconv.FormatUint(sr.GetCounter(), 10)
			if at, dup := seen[key]; dup {
				c.rep.Add(Problem{Kind: Forked, Object: logObject(sr.GetSequence()), Detail: fmt.Sprintf("a second record for counter %d of %s (first at log %d)", sr.GetCounter(), crypt.DeviceID(sr.GetOrigin()).Short(), at)})
				continue
			}
			seen[key] = sr.GetSequence()
			c.seqs[sr.GetSequence()] = true
			fk := crypt.FileKey(sr.GetFileKey())
			c.newest[fk] = max(c.newest[fk], sr.GetSequence())
			c.record(sr)
		}
		c.progress(Progress{Phase: "log", Records: c.rep.Records})
		return nil
	})
	if err != nil {
		return err
	}
	k := c.opts.Known
	switch {
	case k.LogID != 0 && logID != k.LogID:
		c.rep.Add(Problem{Kind: RolledBack, Object: "log", Detail: fmt.Sprintf("the receiver's log started over (ID %x, this device read log %x): it lost what it held", logID, k.LogID)})
	case k.LogID != 0 && last < k.Cursor:
		c.rep.Add(Problem{Kind: RolledBack, Object: "log", Detail: fmt.Sprintf("the receiver's log ends at %d, but this device has read it up to %d", last, k.Cursor)})
	}
	return nil
}

// ErrHostile means a receiver answered a check in a way no honest one
// does (pages that go back or never end): the check stops.
var ErrHostile = errors.New("the receiver's answers make no progress")

// pages calls fn with each page of the receiver's log, from the start,
// until a page without More; a page with More must hold records, and the
// next one starts after them.
func (c *trustedCheck) pages(ctx context.Context, fn func(*protocol.LogPage) error) error {
	offset := int64(1)
	for {
		data, err := c.req(ctx, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_LOG_READ, Folder: c.opts.Folder, Offset: offset, Size: logPageSize})
		if err != nil {
			return fmt.Errorf("reading the receiver's log: %w", err)
		}
		var page protocol.LogPage
		if err := protocol.DecodeAnswer(data, &page); err != nil {
			return fmt.Errorf("reading the receiver's log: %w", err)
		}
		for _, sr := range page.GetRecords() {
			if sr.GetSequence() < offset {
				return fmt.Errorf("%w: asked for the log from %d, it sent a record at %d", ErrHostile, offset, sr.GetSequence())
			}
		}
		if err := fn(&page); err != nil {
			return err
		}
		if !page.GetMore() {
			return nil
		}
		recs := page.GetRecords()
		if len(recs) == 0 {
			return fmt.Errorf("%w: an empty log page that says more follow", ErrHostile)
		}
		offset = recs[len(recs)-1].GetSequence() + 1
	}
}

// VersionID names a version kept on receivers as the versions list does:
// "<origin hex>-<counter>".
func VersionID(origin []byte, counter uint64) string {
	return hex.EncodeToString(origin) + "-" + strconv.FormatUint(counter, 10)
}

func logObject(seq int64) string { return "log " + strconv.FormatInt(seq, 10) }

// record opens one record and notes what it needs.
func (c *trustedCheck) record(sr *protocol.SealedRecord) {
	c.rep.Records++
	o, err := sealed.OpenAll(c.opts.Keys, c.opts.Folder, sr)
	if errors.Is(err, crypt.ErrNewerKey) {
		c.rep.Add(Problem{Kind: Unreadable, Object: logObject(sr.GetSequence()), Detail: "sealed with a newer folder key than this device has: share the folder again with the current password"})
		return
	}
	if err != nil {
		c.rep.Add(Problem{Kind: Damaged, Object: logObject(sr.GetSequence()), Detail: "the record does not open under the folder key: " + err.Error()})
		return
	}
	origin, fk, r := crypt.DeviceID(sr.GetOrigin()), crypt.FileKey(sr.GetFileKey()), o.Record
	c.prover.Note(origin, fk, sr.GetCounter(), r.Deleted, o.Checkpoint)
	vid := VersionID(origin[:], sr.GetCounter())
	if origin == c.opts.Self {
		c.own[fk] = append(c.own[fk], sr.GetCounter())
		if int64(sr.GetCounter()) > c.opts.Known.LocalSequence {
			c.rep.Add(Problem{Kind: Forked, Object: logObject(sr.GetSequence()), Path: r.Name, Version: vid,
				Detail: fmt.Sprintf("a record under this device's name with counter %d, but this device never sealed past %d", sr.GetCounter(), c.opts.Known.LocalSequence)})
		}
	}
	kept := r
	kept.Blocks = nil // Wins needs the rest, not the blocks
	c.best[fk] = append(c.best[fk], kept)
	if r.Deleted || len(r.Blocks) == 0 {
		return
	}
	c.versions = append(c.versions, version{path: r.Name, id: vid})
	v := int32(len(c.versions) - 1)
	for _, b := range r.Blocks {
		id := c.opts.Keys.ChunkID(b.Hash)
		n := c.needs[id]
		if n == nil {
			n = &need{hash: b.Hash, plain: int(b.Size)}
			c.needs[id] = n
		}
		if len(n.versions) == 0 || n.versions[len(n.versions)-1] != v {
			n.versions = append(n.versions, v)
		}
	}
}

// checkProofs holds each origin's newest checkpoint against the log.
func (c *trustedCheck) checkProofs() {
	c.rep.Versions = len(c.versions)
	for _, p := range c.prover.Proofs() {
		if p.Complete {
			continue
		}
		c.rep.Add(Problem{Kind: RolledBack, Object: "checkpoint of " + p.Origin.Short().String(),
			Detail: fmt.Sprintf("the checkpoint %s sealed at %s covers %d files up to counter %d; the log gives %d of them, not all as checkpointed: records withheld or rolled back",
				p.Origin.Short(), p.AsOf.UTC().Format(time.RFC3339), p.Files, p.Counter, p.Found)})
	}
}

// checkOwn looks for each of this device's records the receiver
// acknowledged: it must be in the log, or beaten there by a newer version
// of its name (which retention may let replace it).
func (c *trustedCheck) checkOwn() {
	if c.opts.Known.Own == nil {
		return
	}
	c.opts.Known.Own(func(r index.Record) {
		if r.Deleted {
			return // retention drops deletions after keep-deleted-days
		}
		fk := c.opts.Keys.FileKey(r.Name)
		for _, counter := range c.own[fk] {
			if int64(counter) >= r.Sequence {
				return
			}
		}
		for i := range c.best[fk] {
			if b := &c.best[fk][i]; b.Wins(&r) || b.Version.Compare(r.Version) == index.Equal {
				return
			}
		}
		c.rep.Add(Problem{Kind: Missing, Path: r.Name,
			Version: VersionID(c.opts.Self[:], uint64(r.Sequence)),
			Detail:  "the receiver acknowledged this version, and its log no longer holds it or anything newer of the file"})
	})
}

// checkSeen looks for each version this device read in the receiver's
// log before: still there, or a newer record of its name, unless it is a
// deletion (retention drops those once they expire).
func (c *trustedCheck) checkSeen() {
	if c.opts.Known.Seen == nil {
		return
	}
	c.opts.Known.Seen(func(r index.Record) {
		if r.Deleted || r.Sequence > c.opts.Known.Cursor || c.seqs[r.Sequence] {
			return
		}
		if c.newest[c.opts.Keys.FileKey(r.Name)] > r.Sequence {
			return
		}
		c.rep.Add(Problem{Kind: Missing, Object: logObject(r.Sequence), Path: r.Name,
			Detail: fmt.Sprintf("this device read this version at log %d, and the log no longer holds it or anything newer of the file: records withheld or rolled back", r.Sequence)})
	})
}

// readChunkList reads the receiver's chunk list, keeping the sizes of the
// chunks kept versions need.
func (c *trustedCheck) readChunkList(ctx context.Context) error {
	var after []byte
	for {
		data, err := c.req(ctx, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_CHUNK_LIST, Folder: c.opts.Folder, ChunkId: after, Size: chunkPageSize})
		if err != nil {
			return fmt.Errorf("reading the receiver's chunk list: %w", err)
		}
		var list protocol.ChunkList
		if err := protocol.DecodeAnswer(data, &list); err != nil {
			return fmt.Errorf("reading the receiver's chunk list: %w", err)
		}
		for _, e := range list.GetChunks() {
			if after != nil && bytes.Compare(e.GetId(), after) <= 0 {
				return fmt.Errorf("%w: the chunk list goes back (%x after %x)", ErrHostile, e.GetId(), after)
			}
			if n := c.needs[crypt.ChunkID(e.GetId())]; n != nil {
				n.size = e.GetSize()
			}
			after = e.GetId()
		}
		if list.GetMore() && len(list.GetChunks()) == 0 {
			return fmt.Errorf("%w: an empty chunk list page that says more follow", ErrHostile)
		}
		c.progress(Progress{Phase: "chunks", Records: c.rep.Records})
		if !list.GetMore() || len(list.GetChunks()) == 0 {
			return nil
		}
	}
}

// checkChunks holds every needed chunk against the list: present, and of
// a size its plaintext can seal to.
func (c *trustedCheck) checkChunks() {
	c.rep.Chunks = len(c.needs)
	for id, n := range c.needs {
		switch {
		case n.size == 0:
			c.affected(Missing, id, n, "the receiver does not list this chunk")
		case n.size > int64(crypt.SealedChunkLen(n.plain)) || n.size <= int64(crypt.SealedChunkLen(0)):
			c.affected(Damaged, id, n, fmt.Sprintf("listed with %d bytes, which %d bytes of plaintext cannot seal to", n.size, n.plain))
		}
	}
}

// affected adds a problem with chunk id for each version that needs it.
func (c *trustedCheck) affected(kind Kind, id crypt.ChunkID, n *need, detail string) {
	if kind == Missing || kind == Damaged {
		c.bad[id] = true
	}
	for _, v := range n.versions {
		c.pending = append(c.pending, Problem{Kind: kind, Object: "chunk " + id.String(), Path: c.versions[v].path, Version: c.versions[v].id, Detail: detail})
	}
}

// readData fetches and opens the chunks opts.ReadData chooses.
func (c *trustedCheck) readData(ctx context.Context) error {
	ids, total, err := c.choose()
	if err != nil || len(ids) == 0 {
		return err
	}
	var (
		mu   sync.Mutex
		done int
		read int64
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchWorkers)
	for _, id := range ids {
		n := c.needs[id]
		g.Go(func() error {
			body, err := c.req(gctx, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: c.opts.Folder, ChunkId: id[:], Size: uint32(crypt.MaxSealedChunkSize)})
			var kind Kind
			var detail string
			switch {
			case errors.Is(err, protocol.ErrNoSuchFile):
				kind, detail = Missing, "the receiver lists this chunk but could not serve it"
			case err != nil && gctx.Err() != nil:
				return gctx.Err()
			case err != nil:
				kind, detail = Unreadable, "fetching it failed: "+err.Error()
			default:
				if _, oerr := c.opts.Keys.OpenBlockTo(nil, n.hash, body); oerr != nil {
					kind, detail = Damaged, "it does not open or hash as its version says: "+oerr.Error()
				}
				if kind != "" && int64(len(body)) == n.size {
					mu.Lock()
					c.whole[id] = true
					mu.Unlock()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			done++
			read += int64(len(body))
			protocol.Recycle(body)
			if kind != "" {
				c.affected(kind, id, n, detail)
			}
			c.progress(Progress{Phase: "data", Records: c.rep.Records, Chunks: done, ChunksTotal: len(ids), Bytes: read, BytesTotal: total})
			return nil
		})
	}
	err = g.Wait()
	c.rep.BytesRead = read
	return err
}

// repair sends the chunks found bad again, where opts.Repair finds them.
func (c *trustedCheck) repair(ctx context.Context) error {
	if c.opts.Repair == nil {
		return nil
	}
	for id := range c.bad {
		n := c.needs[id]
		what := "chunk " + id.String() + " of " + c.versions[n.versions[0]].path
		if n.size == 0 {
			c.rep.Unrepaired = append(c.rep.Unrepaired, what+": the receiver no longer lists it")
			continue
		}
		if c.whole[id] {
			c.rep.Unrepaired = append(c.rep.Unrepaired, what+": the receiver's copy reads whole but does not open; a receiver replaces only copies it lacks or cannot read, so that no device can overwrite the history it keeps")
			continue
		}
		body, from, err := c.opts.Repair(ctx, id, n.hash, n.size)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.rep.Unrepaired = append(c.rep.Unrepaired, what+": "+err.Error())
			continue
		}
		_, err = c.req(ctx, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_CHUNK_REPAIR, Folder: c.opts.Folder, ChunkId: id[:], Body: body})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			why := err.Error()
			if errors.Is(err, protocol.ErrInvalidFile) {
				why = "its copy reads whole, or is of another size"
			}
			c.rep.Unrepaired = append(c.rep.Unrepaired, what+": the receiver refused it ("+why+")")
			continue
		}
		c.rep.Repaired = append(c.rep.Repaired, what+" (from "+from+")")
	}
	slices.Sort(c.rep.Repaired)
	slices.Sort(c.rep.Unrepaired)
	return nil
}

// recheck reports the chunk problems found, those of versions still in
// the log: a prune on the receiver between the log and the chunk list
// drops versions and then their chunks, which are no loss. The log is
// read again only when there is something to report.
func (c *trustedCheck) recheck(ctx context.Context) error {
	if len(c.pending) == 0 {
		return nil
	}
	present := map[string]bool{}
	err := c.pages(ctx, func(page *protocol.LogPage) error {
		for _, sr := range page.GetRecords() {
			present[VersionID(sr.GetOrigin(), sr.GetCounter())] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	stillBad := map[crypt.ChunkID]bool{}
	for _, p := range c.pending {
		if p.Version != "" && !present[p.Version] {
			continue
		}
		c.rep.Add(p)
		if id, err := crypt.ParseChunkID(strings.TrimPrefix(p.Object, "chunk ")); err == nil {
			stillBad[id] = true
		}
	}
	c.bad, c.pending = stillBad, nil
	return nil
}

// choose returns the chunks to read, in random order, and their listed
// bytes. Only chunks the receiver lists are read: the rest are reported
// missing already.
func (c *trustedCheck) choose() ([]crypt.ChunkID, int64, error) {
	rd := c.opts.ReadData
	if rd.mode() == "metadata" {
		return nil, 0, nil
	}
	var ids []crypt.ChunkID
	var all int64
	for id, n := range c.needs {
		if n.size > 0 {
			ids = append(ids, id)
			all += n.size
		}
	}
	// A fresh random order each run, so that repeated subset checks
	// cover the whole store in time.
	for i := len(ids) - 1; i > 0; i-- {
		j, err := rand.Int(rand.Reader, big.NewInt(int64(i+1)))
		if err != nil {
			return nil, 0, err
		}
		ids[i], ids[j.Int64()] = ids[j.Int64()], ids[i]
	}
	if rd.All {
		return ids, all, nil
	}
	wantCount := int(float64(len(ids))*rd.Percent/100 + 0.999999)
	var bytes int64
	for i, id := range ids {
		if i >= wantCount && bytes >= rd.Bytes {
			return ids[:i], bytes, nil
		}
		bytes += c.needs[id].size
	}
	return ids, bytes, nil
}
