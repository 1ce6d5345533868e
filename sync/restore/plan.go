package restore

import (
	"errors"
	"log/slog"
	"path"
	"slices"
	"strings"

	"lockstep/crypt"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/sealed"
)

// collector opens sealed records and keeps the winning version of each
// name. It is used from one goroutine.
type collector struct {
	keys   *crypt.Keys
	folder string
	log    *slog.Logger

	best map[string]index.Record
	// failed holds the file keys of records that failed verification.
	failed map[crypt.FileKey]bool
	bad    int    // records that failed verification
	last   int64  // highest log sequence seen
	pol    uint64 // the chunking polynomial of the newest winner that says
	polSeq int64
	// prover holds every verified record's marks, by origin, for the
	// checkpoints.
	prover *sealed.Prover
}

func newCollector(keys *crypt.Keys, folder string, log *slog.Logger) *collector {
	return &collector{keys: keys, folder: folder, log: log, best: map[string]index.Record{}, failed: map[crypt.FileKey]bool{}, prover: sealed.NewProver(keys)}
}

// add opens and checks sr (its field sizes, sealed.OpenWithPolynomial, then
// fsys.ValidName) and keeps it if it beats the version of its name seen so
// far. A record that fails is counted and its file key remembered, never
// used.
func (c *collector) add(sr *protocol.SealedRecord) {
	c.last = max(c.last, sr.GetSequence())
	err := checkSizes(sr)
	var o sealed.Opened
	if err == nil {
		o, err = sealed.OpenAll(c.keys, c.folder, sr)
	}
	r, pol := o.Record, o.Polynomial
	if err == nil {
		err = fsys.ValidName(r.Name)
	}
	if err != nil {
		c.bad++
		if len(sr.GetFileKey()) == len(crypt.FileKey{}) {
			c.failed[crypt.FileKey(sr.GetFileKey())] = true
		}
		c.log.Warn("a record failed verification", "folder", c.folder, "sequence", sr.GetSequence(), "err", err)
		return
	}
	c.prover.Note(crypt.DeviceID(sr.GetOrigin()), crypt.FileKey(sr.GetFileKey()), sr.GetCounter(), r.Deleted, o.Checkpoint)
	if cur, ok := c.best[r.Name]; ok && !r.Wins(&cur) {
		return
	}
	c.best[r.Name] = r
	if pol != 0 && sr.GetSequence() >= c.polSeq {
		c.pol, c.polSeq = pol, sr.GetSequence()
	}
}

// checkSizes checks the fixed sizes of sr's fields. The protocol checks
// them on receipt already; sealed.Open relies on them.
func checkSizes(sr *protocol.SealedRecord) error {
	if len(sr.GetOrigin()) != len(crypt.DeviceID{}) || len(sr.GetFileKey()) != len(crypt.FileKey{}) || sr.GetSequence() < 0 {
		return errors.New("malformed sealed record")
	}
	for _, id := range sr.GetChunks() {
		if len(id) != len(crypt.ChunkID{}) {
			return errors.New("malformed chunk ID in sealed record")
		}
	}
	return nil
}

// plan is what to write, each list sorted by name.
type plan struct {
	// dirs are the directories to create: the winners' directories and
	// the parents of every entry. Parents without a record have Mode 0
	// and Version nil.
	dirs     []index.Record
	files    []index.Record
	symlinks []index.Record
	// unplaceable are names whose parent is a file or symlink winner.
	unplaceable []string
	bytes       int64
}

// plan returns the winners that exist, with the directories they need.
// A name below a winning file or symlink cannot be placed; it is listed
// in unplaceable rather than written.
func (c *collector) plan() *plan {
	p := &plan{}
	names := make([]string, 0, len(c.best))
	for name, r := range c.best {
		if !r.Deleted {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	// A name's ancestors sort before it, so blocked parents are known by
	// the time their children come.
	blocked := map[string]bool{}
	implicit := map[string]bool{}
	for _, name := range names {
		if c.blockedBy(name, blocked) {
			p.unplaceable = append(p.unplaceable, name)
			c.log.Warn("a name lies below a file or symlink; not restored", "folder", c.folder, "name", name)
			continue
		}
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if r, ok := c.best[dir]; (!ok || r.Deleted) && !implicit[dir] {
				implicit[dir] = true
				p.dirs = append(p.dirs, index.Record{Name: dir, Type: index.Dir})
			}
		}
		r := c.best[name]
		switch r.Type {
		case index.Dir:
			p.dirs = append(p.dirs, r)
		case index.File:
			p.files = append(p.files, r)
			p.bytes += r.Size
			blocked[name] = true
		case index.Symlink:
			p.symlinks = append(p.symlinks, r)
			blocked[name] = true
		}
	}
	slices.SortFunc(p.dirs, func(a, b index.Record) int { return strings.Compare(a.Name, b.Name) })
	if len(c.failed) > 0 {
		for _, name := range names {
			if c.failed[c.keys.FileKey(name)] {
				c.log.Warn("a record of this name failed verification; the winning verified version is restored", "folder", c.folder, "name", name)
			}
		}
	}
	return p
}

// blockedBy reports whether an ancestor of name is in blocked.
func (c *collector) blockedBy(name string, blocked map[string]bool) bool {
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if blocked[dir] {
			return true
		}
	}
	return false
}
