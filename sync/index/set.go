package index

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/btree"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// Store persists records; *db.DB is one.
type Store interface {
	PutFiles(ctx context.Context, folderID, deviceID string, recs []db.FileRecord) error
	Files(ctx context.Context, folderID, deviceID string, fn func(db.FileRecord) error) error
	FileDevices(ctx context.Context, folderID string) ([]string, error)
	DeleteFiles(ctx context.Context, folderID, deviceID string) error
}

// Set is one folder's records from every device: this node's own (local)
// and each peer's, held in memory and written through to a Store. It
// answers what the global version of each file is and what this node
// needs. Safe for concurrent use.
type Set struct {
	folder string
	store  Store

	mu    sync.RWMutex
	local map[string]*Record
	// The local records again, in name order and in sequence order:
	// announcing what changed since a sequence, and a scan of one
	// directory, cost what they visit. Walking the map for them made a
	// node pulling 100,000 files spend 35 s of CPU in them (each pulled
	// batch announced, each written directory rescanned).
	byName   *btree.BTreeG[*Record]
	bySeq    *btree.BTreeG[*Record]
	remote   map[crypt.DeviceID]map[string]*Record
	devs     []crypt.DeviceID // remote's keys, sorted: global looks in this order
	localSeq int64

	// Kept current by every change (see account), so that status, which
	// is asked for often, and Need, asked at every index update, cost
	// what changed rather than the whole folder.
	counts Counts
	need   map[string]struct{}
	have   map[crypt.DeviceID]*tally // what each peer has at the global version
}

// tally counts files and their bytes.
type tally struct{ files, bytes int64 }

// Load reads a folder's records from store.
func Load(ctx context.Context, store Store, folder string) (*Set, error) {
	s := &Set{folder: folder, store: store, local: map[string]*Record{}, remote: map[crypt.DeviceID]map[string]*Record{},
		byName: btree.NewG(32, func(a, b *Record) bool { return a.Name < b.Name }),
		// Sequences of local records are unique; the name makes the order
		// total all the same, so that a database holding a duplicate
		// loses no record here.
		bySeq: btree.NewG(32, func(a, b *Record) bool {
			return a.Sequence < b.Sequence || a.Sequence == b.Sequence && a.Name < b.Name
		})}
	devs, err := store.FileDevices(ctx, folder)
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		m := map[string]*Record{}
		if d == db.LocalDevice {
			m = s.local
		} else {
			id, err := crypt.ParseDeviceID(d)
			if err != nil {
				return nil, fmt.Errorf("folder %s: records of bad device %q: %w", folder, d, err)
			}
			s.remote[id] = m
			s.devs = append(s.devs, id)
		}
		err := store.Files(ctx, folder, d, func(f db.FileRecord) error {
			r, err := fromDB(f)
			if err != nil {
				return fmt.Errorf("record %q of device %q: %w", f.Name, d, err)
			}
			m[r.Name] = &r
			if d == db.LocalDevice {
				s.localSeq = max(s.localSeq, r.Sequence)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("loading folder %s: %w", folder, err)
		}
	}
	for _, r := range s.local {
		s.byName.ReplaceOrInsert(r)
		s.bySeq.ReplaceOrInsert(r)
	}
	for _, m := range s.remote {
		for name, r := range m {
			if l := s.local[name]; l != nil {
				shareWith(r, l)
			}
		}
	}
	slices.SortFunc(s.devs, func(a, b crypt.DeviceID) int { return bytes.Compare(a[:], b[:]) })
	s.recount()
	return s, nil
}

// putLocal makes r name's local record. Callers hold mu for writing.
func (s *Set) putLocal(r *Record) {
	if old := s.local[r.Name]; old != nil {
		s.bySeq.Delete(old)
	}
	s.local[r.Name] = r
	s.byName.ReplaceOrInsert(r)
	s.bySeq.ReplaceOrInsert(r)
}

// recount computes the aggregates afresh. Callers hold mu for writing.
func (s *Set) recount() {
	s.counts, s.need, s.have = Counts{}, map[string]struct{}{}, map[crypt.DeviceID]*tally{}
	s.eachName(func(name string, _ *Record) { s.account(name, 1) })
}

// account adds (sign 1) or takes away (sign -1) name's share of the
// aggregates. A change of name's records is accounted for by taking its
// share away before and adding it back after. Callers hold mu for writing.
func (s *Set) account(name string, sign int64) {
	l := s.local[name]
	if l != nil && !l.Deleted {
		if l.Type == Dir {
			s.counts.LocalDirectories += sign
		} else {
			s.counts.LocalFiles += sign
		}
		s.counts.LocalBytes += sign * l.Size
	}
	g := s.global(name)
	if g == nil {
		return
	}
	if !g.Deleted {
		if g.Type == Dir {
			s.counts.GlobalDirectories += sign
		} else {
			s.counts.GlobalFiles += sign
		}
		s.counts.GlobalBytes += sign * g.Size
		for dev, m := range s.remote {
			if r, ok := m[name]; ok && r.Version.Compare(g.Version) == Equal {
				t := s.have[dev]
				if t == nil {
					t = &tally{}
					s.have[dev] = t
				}
				t.files += sign
				t.bytes += sign * g.Size
			}
		}
	}
	if needs(l, g) {
		if g.Type == Dir {
			s.counts.NeedDirectories += sign
		} else {
			s.counts.NeedFiles += sign
		}
		if !g.Deleted {
			s.counts.NeedBytes += sign * g.Size
		}
		if sign > 0 {
			s.need[name] = struct{}{}
		} else {
			delete(s.need, name)
		}
	}
}

// change applies set, which changes the records of names, keeping the
// aggregates current. Callers hold mu for writing.
func (s *Set) change(names []string, set func()) {
	unique := make(map[string]struct{}, len(names))
	for _, n := range names {
		unique[n] = struct{}{}
	}
	for n := range unique {
		s.account(n, -1)
	}
	set()
	for n := range unique {
		s.account(n, 1)
	}
}

// names lists recs' names.
func names(recs []Record) []string {
	out := make([]string, len(recs))
	for i := range recs {
		out[i] = recs[i].Name
	}
	return out
}

// Local returns the local record of name.
func (s *Set) Local(name string) (Record, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.local[name]
	if !ok {
		return Record{}, false
	}
	return *r, true
}

// EachLocal calls fn for every local record that is not deleted, in name
// order. fn must not call back into s for writing.
func (s *Set) EachLocal(fn func(Record) error) error {
	return s.eachLocal("", fn)
}

// EachLocalUnder is EachLocal for the records under dir (names starting
// with dir + "/"). A scan of a few changed paths uses it, so it sorts only
// what it visits, not the whole folder.
func (s *Set) EachLocalUnder(dir string, fn func(Record) error) error {
	return s.eachLocal(dir+"/", fn)
}

func (s *Set) eachLocal(prefix string, fn func(Record) error) error {
	s.mu.RLock()
	recs := make([]*Record, 0, 16)
	s.byName.AscendGreaterOrEqual(&Record{Name: prefix}, func(r *Record) bool {
		if !strings.HasPrefix(r.Name, prefix) {
			return false
		}
		if !r.Deleted {
			recs = append(recs, r)
		}
		return true
	})
	s.mu.RUnlock()
	for _, r := range recs {
		if err := fn(*r); err != nil {
			return err
		}
	}
	return nil
}

// LocalSequence is the highest sequence of the local records.
func (s *Set) LocalSequence() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.localSeq
}

// UpdateLocal stores new local records, giving each the next sequence
// number, and returns them as stored. Records of distinct names get their
// sequences in random order: sequences are the counters an untrusted
// receiver sees, and in the order given (a scan's walk, a pull's plan)
// they would tell it the folder's tree.
func (s *Set) UpdateLocal(ctx context.Context, recs []Record) ([]Record, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	recs = shuffled(recs)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, len(recs))
	rows := make([]db.FileRecord, len(recs))
	seq := s.localSeq
	for i, r := range recs {
		seq++
		r.Sequence = seq
		out[i] = r
		rows[i] = toDB(&out[i])
	}
	if err := s.store.PutFiles(ctx, s.folder, db.LocalDevice, rows); err != nil {
		return nil, err
	}
	s.localSeq = seq
	s.change(names(out), func() {
		for i := range out {
			r := out[i]
			s.putLocal(&r)
		}
	})
	return out, nil
}

// shuffled returns recs in random order, or as they are if a name comes
// twice (then the later must win).
func shuffled(recs []Record) []Record {
	seen := make(map[string]struct{}, len(recs))
	for i := range recs {
		if _, dup := seen[recs[i].Name]; dup {
			return recs
		}
		seen[recs[i].Name] = struct{}{}
	}
	out := slices.Clone(recs)
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// UpdateRemote stores a peer's records. The peer's sequences are kept as
// sent.
func (s *Set) UpdateRemote(ctx context.Context, dev crypt.DeviceID, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	rows := make([]db.FileRecord, len(recs))
	for i := range recs {
		rows[i] = toDB(&recs[i])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.store.PutFiles(ctx, s.folder, dev.String(), rows); err != nil {
		return err
	}
	s.change(names(recs), func() {
		m := s.remote[dev]
		if m == nil {
			m = map[string]*Record{}
			s.remote[dev] = m
			i, _ := slices.BinarySearchFunc(s.devs, dev, func(a, b crypt.DeviceID) int { return bytes.Compare(a[:], b[:]) })
			s.devs = slices.Insert(s.devs, i, dev)
		}
		for i := range recs {
			r := recs[i]
			if l := s.local[r.Name]; l != nil {
				shareWith(&r, l)
			}
			m[r.Name] = &r
		}
	})
	return nil
}

// shareWith points r's name, and its version, blocks and target where they
// equal l's, at l's: a peer's record of a file in sync is mostly the bytes
// of ours, and kept once the collector has a third fewer objects to mark
// at 100,000 files. Records are never changed in place, so sharing is safe.
func shareWith(r, l *Record) {
	r.Name = l.Name
	if r.Version.Compare(l.Version) == Equal {
		r.Version = l.Version
	}
	if slices.Equal(r.Blocks, l.Blocks) {
		r.Blocks = l.Blocks
	}
	if r.Target == l.Target {
		r.Target = l.Target
	}
}

// DropRemote forgets all of a peer's records (its index will be sent again
// from the start).
func (s *Set) DropRemote(ctx context.Context, dev crypt.DeviceID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.store.DeleteFiles(ctx, s.folder, dev.String()); err != nil {
		return err
	}
	delete(s.remote, dev)
	s.devs = slices.DeleteFunc(s.devs, func(d crypt.DeviceID) bool { return d == dev })
	s.recount()
	return nil
}

// RemoteSequence is the highest sequence of dev's records this node has.
func (s *Set) RemoteSequence(dev crypt.DeviceID) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var seq int64
	for _, r := range s.remote[dev] {
		seq = max(seq, r.Sequence)
	}
	return seq
}

// LocalSince returns the local records with a sequence above seq, in
// sequence order, leaving out FlagLocalOnly records (never announced).
func (s *Set) LocalSince(seq int64) []Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Record
	s.bySeq.AscendGreaterOrEqual(&Record{Sequence: seq + 1}, func(r *Record) bool {
		if r.Flags&FlagLocalOnly == 0 {
			out = append(out, *r)
		}
		return true
	})
	return out
}

// EachAnnounced calls fn for every local record peers are told of, under
// the read lock so that together they are the index at one sequence, and
// returns the highest sequence among them. It returns ok false, having
// called fn for none or some, when a local record is FlagLocalOnly: what
// peers hold of that name is an older record the set no longer has. fn
// must not keep r or call into s.
func (s *Set) EachAnnounced(fn func(r *Record)) (seq int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range s.local {
		if r.Flags&FlagLocalOnly != 0 {
			return 0, false
		}
		seq = max(seq, r.Sequence)
		fn(r)
	}
	return seq, true
}

// global returns the winning record of name among all devices, counting the
// local record unless it is local-only. Callers hold mu.
func (s *Set) global(name string) *Record {
	var g *Record
	if r, ok := s.local[name]; ok && r.Flags&FlagLocalOnly == 0 {
		g = r
	}
	// In a fixed order: Wins is not transitive when some records are
	// concurrent and others dominated, and the global record must not
	// depend on map order (the tallies take a name's share away as they
	// added it).
	for _, dev := range s.devs {
		if r, ok := s.remote[dev][name]; ok && (g == nil || r.Wins(g)) {
			g = r
		}
	}
	return g
}

// Global returns the global version of name.
func (s *Set) Global(name string) (Record, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.global(name)
	if g == nil {
		return Record{}, false
	}
	return *g, true
}

// Has lists the peers whose record of name has exactly version v: the
// devices that can serve its content.
func (s *Set) Has(name string, v Vector) []crypt.DeviceID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []crypt.DeviceID
	for dev, m := range s.remote {
		if r, ok := m[name]; ok && !r.Deleted && r.Version.Compare(v) == Equal {
			out = append(out, dev)
		}
	}
	return out
}

// needs reports whether the local record must become g.
func needs(local, g *Record) bool {
	if g == nil {
		return false
	}
	if local == nil {
		return !g.Deleted
	}
	if local == g {
		return false
	}
	return g.Version.Compare(local.Version) != Equal && g.Wins(local)
}

// Need returns the global records this node needs, in pull order:
// directories first (parents before children), then files and symlinks,
// then deletions (children before parents).
func (s *Set) Need() []Record {
	s.mu.RLock()
	out := make([]Record, 0, len(s.need))
	for name := range s.need {
		out = append(out, *s.global(name))
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return pullBefore(&out[i], &out[j]) })
	return out
}

func pullRank(r *Record) int {
	switch {
	case r.Deleted:
		return 2
	case r.Type == Dir:
		return 0
	}
	return 1
}

func pullBefore(a, b *Record) bool {
	ra, rb := pullRank(a), pullRank(b)
	if ra != rb {
		return ra < rb
	}
	if ra == 2 {
		// Deeper names first, so a directory is emptied before it goes.
		da, db := strings.Count(a.Name, "/"), strings.Count(b.Name, "/")
		if da != db {
			return da > db
		}
	}
	return a.Name < b.Name
}

// Counts summarises a folder for status reports.
type Counts struct {
	LocalFiles, LocalBytes   int64
	GlobalFiles, GlobalBytes int64
	NeedFiles, NeedBytes     int64
	// Directories are counted apart from files (regular files and
	// symlinks).
	LocalDirectories, GlobalDirectories, NeedDirectories int64
}

// eachName calls fn once for every name any device has a record of, with
// its global record (nil if none counts). Callers hold mu.
func (s *Set) eachName(fn func(name string, g *Record)) {
	seen := func(name string, upto int, devs []map[string]*Record) bool {
		for _, m := range devs[:upto] {
			if _, ok := m[name]; ok {
				return true
			}
		}
		return false
	}
	devs := make([]map[string]*Record, 0, len(s.remote)+1)
	devs = append(devs, s.local)
	for _, m := range s.remote {
		devs = append(devs, m)
	}
	for i, m := range devs {
		for name := range m {
			if !seen(name, i, devs) {
				fn(name, s.global(name))
			}
		}
	}
}

// Counts returns the folder's counts. Files count regular files and
// symlinks that are not deleted, Directories the directories; the need
// counts deletions too.
func (s *Set) Counts() Counts {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.counts
}

// Completion is the percentage of the global bytes (and files, for an
// empty folder) that dev has at the global version.
func (s *Set) Completion(dev crypt.DeviceID) float64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var have tally
	if t := s.have[dev]; t != nil && s.remote[dev] != nil {
		have = *t
	}
	switch {
	case s.counts.GlobalBytes > 0:
		return 100 * float64(have.bytes) / float64(s.counts.GlobalBytes)
	case s.counts.GlobalFiles+s.counts.GlobalDirectories > 0:
		// have.files counts directories too.
		return 100 * float64(have.files) / float64(s.counts.GlobalFiles+s.counts.GlobalDirectories)
	}
	return 100
}

// Remote returns dev's record of name.
func (s *Set) Remote(dev crypt.DeviceID, name string) (Record, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.remote[dev][name]
	if !ok {
		return Record{}, false
	}
	return *r, true
}

// EachRemote calls fn with a copy of each record this node keeps of
// device dev (for a receiver: the newest version of each name its log
// served, with the log sequence as Sequence). fn must not call into s.
func (s *Set) EachRemote(dev crypt.DeviceID, fn func(Record)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range s.remote[dev] {
		fn(*r)
	}
}

// Renumber gives every local record a new sequence above after (or above
// the current highest, whichever is larger), in their current order. A
// node whose database was reset numbers its records from 1 again; a
// receiver that kept records numbered by the old database would take the
// new ones for copies of those it holds, so they are renumbered past them.
func (s *Set) Renumber(ctx context.Context, after int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := make([]*Record, 0, len(s.local))
	for _, r := range s.local {
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Sequence < recs[j].Sequence })
	seq := max(after, s.localSeq)
	out := make([]Record, len(recs))
	rows := make([]db.FileRecord, len(recs))
	for i, r := range recs {
		seq++
		out[i] = *r
		out[i].Sequence = seq
		rows[i] = toDB(&out[i])
	}
	if err := s.store.PutFiles(ctx, s.folder, db.LocalDevice, rows); err != nil {
		return err
	}
	s.localSeq = seq
	// Only sequences change, which neither the global record nor the
	// tallies depend on: nothing to account for.
	for i := range out {
		r := out[i]
		s.putLocal(&r)
	}
	return nil
}
