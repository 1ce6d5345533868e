package receiver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/check"
	"lockstep/sync/protocol"
)

// The log part of Check, its pages of database rows, and the problems it
// holds until the records needing their chunks are known.

// logMerge ties the listed log objects to the database's records. The
// database does not record which object a record came from, but appends
// write one object each, keyed by its first sequence, and prunes only
// take records out: so object i holds exactly the records with
// sequences from its key's up to the next object's key, and a record in
// that range the object lacks is missing from the store's log.
type logMerge struct {
	c         *storeCheck
	records   recordSeqs
	prev      *blob.Info // the last object listed, checked once the next one's key is known
	prevFirst int64
	done      bool
}

// object takes the next listed object under log/.
func (m *logMerge) object(info blob.Info) error {
	m.c.total++ // the database cannot count them ahead
	first, err := logFirst(info.Key)
	if err != nil {
		m.c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
			Detail: "not a log object's name (16 hex digits of its first sequence): a rebuild would refuse the store"})
		return nil
	}
	if m.prev != nil {
		if err := m.check(*m.prev, m.prevFirst, first); err != nil {
			return err
		}
	}
	m.prev, m.prevFirst = &info, first
	return nil
}

// finish checks the last object, once the listing is past the log, and
// reports the records left in no object.
func (m *logMerge) finish() error {
	if m.done {
		return nil
	}
	m.done = true
	if m.prev != nil {
		if err := m.check(*m.prev, m.prevFirst, math.MaxInt64); err != nil {
			return err
		}
	}
	return m.inNoObject(math.MaxInt64)
}

// inNoObject reports the records below bound not taken yet: no listed
// object's range holds them.
func (m *logMerge) inNoObject(bound int64) error {
	var gone seqRun
	if err := m.take(bound, func(seq int64) { gone.add(seq) }); err != nil {
		return err
	}
	m.c.missingRecords(gone)
	return nil
}

// take calls fn with each of the database's records below bound not
// taken yet, in log order.
func (m *logMerge) take(bound int64, fn func(int64)) error {
	for {
		seq, ok, err := m.records.peek(m.c.ctx)
		if err != nil {
			return err
		}
		if !ok || seq >= bound {
			return nil
		}
		m.records.pop()
		fn(seq)
	}
}

// check compares the log object info, whose key names first, with the
// database's records from first up to next (the next object's key).
func (m *logMerge) check(info blob.Info, first, next int64) error {
	c := m.c
	if err := m.inNoObject(first); err != nil {
		return err
	}
	var wire []*protocol.SealedRecord
	data, err := getLimited(c.ctx, c.r.store, info.Key, maxLogSize)
	if err == nil {
		c.rep.BytesRead += int64(len(data))
		wire, err = parseLog(logFolder(c.f.fk, c.f.id), info.Key, data)
	}
	if err != nil {
		var held seqRun
		if terr := m.take(next, func(seq int64) { held.add(seq) }); terr != nil {
			return terr
		}
		switch {
		case errors.Is(err, blob.ErrNotExist):
			c.missingRecords(held)
		case errors.Is(err, ErrCorrupt):
			c.add(check.Problem{Kind: check.Damaged, Object: info.Key, Detail: fmt.Sprintf("%v; %s", err, held.from())})
		default:
			return c.unreadable(info.Key, err)
		}
		return nil
	}

	var lacking, extra, overlap seqList
	var beyond seqRun
	last := wire[len(wire)-1].GetSequence()
	j := 0
	err = m.take(next, func(seq int64) {
		for ; j < len(wire) && wire[j].GetSequence() < seq; j++ {
			extra.add(wire[j].GetSequence())
		}
		switch {
		case j < len(wire) && wire[j].GetSequence() == seq:
			j++
		case seq > last:
			beyond.add(seq)
		default:
			lacking.add(seq)
		}
	})
	if err != nil {
		return err
	}
	for ; j < len(wire); j++ {
		if s := wire[j].GetSequence(); s >= next {
			overlap.add(s)
		} else {
			extra.add(s)
		}
	}
	if lacking.n > 0 {
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
			Detail: fmt.Sprintf("log object lacks %s the database holds", lacking.records())})
	}
	if overlap.n > 0 {
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
			Detail: fmt.Sprintf("log object holds %s at or past the next object's first sequence %d: a rebuild would refuse the store", overlap.records(), next)})
	}
	switch {
	case extra.n > 0 && extra.n+overlap.n == len(wire):
		// An append whose commit failed; the next append overwrites it,
		// a restart's replay takes it.
		c.orphan(info, fmt.Sprintf("a log object only of %s the database lacks", extra.records()))
	case extra.n > 0:
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
			Detail: fmt.Sprintf("log object holds %s the database lacks: a rebuild would bring them back", extra.records())})
	}
	c.missingRecords(beyond)
	return nil
}

// missingRecords reports the records of run as in no log object.
func (c *storeCheck) missingRecords(run seqRun) {
	if run.n == 0 {
		return
	}
	c.add(check.Problem{Kind: check.Missing, Object: logKey(c.f.fk, run.lo),
		Detail: fmt.Sprintf("no log object holds the database's %s: the log object or objects they came from are gone, and a rebuild from the store would lose them", run.span())})
}

// seqRun sums up log sequences taken in order.
type seqRun struct {
	n      int
	lo, hi int64
}

func (r *seqRun) add(seq int64) {
	if r.n == 0 {
		r.lo = seq
	}
	r.n++
	r.hi = seq
}

// span says "3 records (log 12 to 14)".
func (r *seqRun) span() string {
	if r.n == 1 {
		return fmt.Sprintf("record (log %d)", r.lo)
	}
	return fmt.Sprintf("%d records (log %d to %d)", r.n, r.lo, r.hi)
}

// from says which of the database's records the run is.
func (r *seqRun) from() string {
	switch r.n {
	case 0:
		return "the database holds no record from it"
	case 1:
		return fmt.Sprintf("the database holds 1 record from it (log %d)", r.lo)
	}
	return fmt.Sprintf("the database holds %d records from it (log %d to %d)", r.n, r.lo, r.hi)
}

// seqList counts log sequences and keeps the first few.
type seqList struct {
	n     int
	first []int64
}

// seqListShown is how many sequences a problem names.
const seqListShown = 3

func (l *seqList) add(seq int64) {
	l.n++
	if len(l.first) < seqListShown {
		l.first = append(l.first, seq)
	}
}

// records says "3 records (log 12, 40, 41)".
func (l *seqList) records() string {
	noun := "records"
	if l.n == 1 {
		noun = "record"
	}
	if l.n == 0 {
		return "no record"
	}
	var b strings.Builder
	for i, s := range l.first {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d", s)
	}
	if l.n > len(l.first) {
		b.WriteString(", ...")
	}
	return fmt.Sprintf("%d %s (log %s)", l.n, noun, b.String())
}

// add holds problem p, tied to the chunks it concerns (the records
// needing them are added to its detail at the end, by trace). Past
// check.MaxProblems it is only counted.
func (c *storeCheck) add(p check.Problem, chunks ...[]byte) {
	if len(c.problems) >= check.MaxProblems {
		c.rep.Truncated++
		return
	}
	h := heldProblem{p: p}
	if len(chunks) > 0 && c.nTraced+len(chunks) <= maxTraced {
		h.traced = true
		for _, id := range chunks {
			c.traced[string(id)] = append(c.traced[string(id)], len(c.problems))
		}
		c.nTraced += len(chunks)
	}
	c.problems = append(c.problems, h)
}

// trace reads every record's chunk list once to say which records need
// the chunks of the problems found, then puts the problems in the
// report.
func (c *storeCheck) trace() error {
	if c.nTraced > 0 {
		recs := recordSeqs{db: c.r.db, folder: c.f.id}
		for {
			rec, ok, err := recs.peekRecord(c.ctx)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			recs.pop()
			for off := 0; off+db.SealedIDSize <= len(rec.Chunks); off += db.SealedIDSize {
				for _, i := range c.traced[string(rec.Chunks[off:off+db.SealedIDSize])] {
					c.problems[i].need(rec.Seq)
				}
			}
		}
	}
	for _, h := range c.problems {
		p := h.p
		if h.traced {
			if h.needed.n == 0 {
				p.Detail += "; needed by no record (garbage for the next prune)"
			} else {
				p.Detail += "; needed by " + h.needed.records()
			}
		}
		c.rep.Add(p)
	}
	return nil
}

// need counts the record seq as needing the problem's chunks, once
// however many of them it references (records come in log order).
func (h *heldProblem) need(seq int64) {
	if h.needed.n > 0 && h.lastSeq == seq {
		return
	}
	h.lastSeq = seq
	h.needed.add(seq)
}

// recordSeqs pages through a folder's records in log order.
type recordSeqs struct {
	db     *db.DB
	folder string
	page   []db.SealedRecord
	after  int64
	done   bool
}

// peek returns the next record's log sequence, false at the end.
func (s *recordSeqs) peek(ctx context.Context) (int64, bool, error) {
	r, ok, err := s.peekRecord(ctx)
	return r.Seq, ok, err
}

// peekRecord returns the next record (Seq and Chunks), false at the end.
func (s *recordSeqs) peekRecord(ctx context.Context) (db.SealedRecord, bool, error) {
	if len(s.page) == 0 && !s.done {
		page, err := s.db.SealedRefsAfter(ctx, s.folder, s.after, checkPage)
		if err != nil {
			return db.SealedRecord{}, false, err
		}
		s.page, s.done = page, len(page) < checkPage
		if len(page) > 0 {
			s.after = page[len(page)-1].Seq
		}
	}
	if len(s.page) == 0 {
		return db.SealedRecord{}, false, nil
	}
	return s.page[0], true, nil
}

// pop drops the record peek returned.
func (s *recordSeqs) pop() { s.page = s.page[1:] }

// looseRows pages through a folder's loose chunk rows by ID.
type looseRows struct {
	db     *db.DB
	folder string
	page   []db.SealedChunk
	after  []byte
	done   bool
}

// peek returns the next row, nil at the end.
func (l *looseRows) peek(ctx context.Context) (*db.SealedChunk, error) {
	if len(l.page) == 0 && !l.done {
		page, err := l.db.SealedLooseChunksAfter(ctx, l.folder, l.after, checkPage)
		if err != nil {
			return nil, err
		}
		l.page, l.done = page, len(page) < checkPage
		if len(page) > 0 {
			l.after = page[len(page)-1].ID
		}
	}
	if len(l.page) == 0 {
		return nil, nil
	}
	return &l.page[0], nil
}

// pop drops the row peek returned.
func (l *looseRows) pop() { l.page = l.page[1:] }
