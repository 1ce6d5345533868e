package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/sealed"
)

const folder = "docs"

// store is a receiver's log and chunks in memory, served as the real
// receiver serves them (sync/receiver/checkread.go), a few per page.
type store struct {
	logID  uint64
	last   int64
	log    []*protocol.SealedRecord
	chunks map[crypt.ChunkID][]byte
	unlist map[crypt.ChunkID]bool // listed or not, served or not
	short  map[crypt.ChunkID]bool // served cut short (a truncated pack)
	fetch  atomic.Int64
}

func (s *store) request(_ context.Context, req *protocol.Request) ([]byte, error) {
	const perPage = 2
	switch req.GetKind() {
	case protocol.RequestKind_REQUEST_KIND_LOG_READ:
		page := &protocol.LogPage{LogId: s.logID, LastSequence: s.last}
		for _, r := range s.log {
			if r.GetSequence() < req.GetOffset() {
				continue
			}
			if len(page.Records) == perPage {
				page.More = true
				break
			}
			page.Records = append(page.Records, r)
		}
		return marshal(page)
	case protocol.RequestKind_REQUEST_KIND_CHUNK_LIST:
		var ids []crypt.ChunkID
		for id := range s.chunks {
			if !s.unlist[id] && bytes.Compare(id[:], req.GetChunkId()) > 0 {
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, func(a, b crypt.ChunkID) int { return bytes.Compare(a[:], b[:]) })
		list := &protocol.ChunkList{}
		for i, id := range ids {
			if i == perPage {
				list.More = true
				break
			}
			list.Chunks = append(list.Chunks, &protocol.ChunkEntry{Id: id[:], Size: int64(len(s.chunks[id]))})
		}
		return marshal(list)
	case protocol.RequestKind_REQUEST_KIND_CHUNK_REPAIR:
		id := crypt.ChunkID(req.GetChunkId())
		if s.chunks[id] == nil && !s.unlist[id] || len(req.GetBody()) != len(s.chunks[id]) && s.chunks[id] != nil {
			return nil, protocol.ErrInvalidFile
		}
		if !s.short[id] && s.chunks[id] != nil {
			return nil, protocol.ErrInvalidFile // reads whole: not replaced
		}
		s.chunks[id], s.short[id] = bytes.Clone(req.GetBody()), false
		return nil, nil
	case protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK:
		s.fetch.Add(1)
		id := crypt.ChunkID(req.GetChunkId())
		body, ok := s.chunks[id]
		if !ok {
			return nil, protocol.ErrNoSuchFile
		}
		if s.short[id] {
			body = body[:len(body)/2]
		}
		return bytes.Clone(body), nil
	}
	return nil, protocol.ErrInvalidFile
}

func marshal(m proto.Message) ([]byte, error) { return proto.Marshal(m) }

// fixture is a device that sealed files to a store.
type fixture struct {
	t     *testing.T
	keys  *crypt.Keys
	self  crypt.DeviceID
	s     *store
	local map[string]index.Record // the device's local index
	seq   int64
}

func newFixture(t *testing.T) *fixture {
	keys, err := crypt.DeriveKeys(crypt.FolderKey{7})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, keys: keys, self: crypt.DeviceID{1, 2, 3},
		s:     &store{logID: 77, chunks: map[crypt.ChunkID][]byte{}, unlist: map[crypt.ChunkID]bool{}, short: map[crypt.ChunkID]bool{}},
		local: map[string]index.Record{}}
}

// write seals a version of name holding the given blocks of data, and a
// checkpoint of the whole local index when cp is set.
func (f *fixture) write(name string, cp bool, blocks ...string) index.Record {
	f.t.Helper()
	f.seq++
	r := index.Record{Name: name, Type: index.File, Mode: 0o644, ModTime: f.seq, Sequence: f.seq, ModifiedBy: f.self.Short(),
		Version: f.local[name].Version.Update(f.self.Short(), uint64(f.seq))}
	var off int64
	for _, b := range blocks {
		h := chunk.HashOf([]byte(b))
		r.Blocks = append(r.Blocks, index.Block{Offset: off, Size: uint32(len(b)), Hash: h})
		off += int64(len(b))
		id, body, err := f.keys.SealChunk([]byte(b), h, false)
		if err != nil {
			f.t.Fatal(err)
		}
		f.s.chunks[id] = body
	}
	r.Size = off
	f.local[name] = r
	var point *sealed.Checkpoint
	if cp {
		d := sealed.NewDigest(f.keys)
		for _, l := range f.local {
			d.Add(f.keys.FileKey(l.Name), uint64(l.Sequence))
		}
		c := d.Checkpoint(uint64(f.seq), time.Now())
		point = &c
	}
	sr, err := sealed.SealWith(f.keys, folder, f.self, &r, 0, point)
	if err != nil {
		f.t.Fatal(err)
	}
	f.s.last++
	sr.Sequence = f.s.last
	f.s.log = append(f.s.log, sr)
	return r
}

// check runs a check as the device that wrote, knowing the log up to its
// end.
func (f *fixture) check(rd ReadData) Report {
	f.t.Helper()
	return f.checkKnowing(rd, Known{LogID: f.s.logID, Cursor: f.s.last, Held: f.seq})
}

func (f *fixture) checkKnowing(rd ReadData, k Known) Report {
	f.t.Helper()
	k.LocalSequence = f.seq
	k.Own = func(fn func(index.Record)) {
		for _, r := range f.local {
			if r.Sequence <= k.Held {
				fn(r)
			}
		}
	}
	rep, err := Trusted(context.Background(), f.s.request, Options{Folder: folder, Receiver: crypt.DeviceID{9}, Self: f.self, Keys: f.keys, Known: k, ReadData: rd})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// filled is a fixture with three files, one of two versions and two
// blocks, the last write checkpointed.
func filled(t *testing.T) *fixture {
	f := newFixture(t)
	f.write("a.txt", false, "alpha")
	f.write("b.txt", false, "bravo one", "bravo two")
	f.write("a.txt", false, "alpha again")
	f.write("dir/c.txt", true, "charlie")
	return f
}

// problems renders a report's problems for comparison.
func problems(r Report) []string {
	var out []string
	for _, p := range r.Problems {
		out = append(out, fmt.Sprintf("%s %s %s", p.Kind, p.Path, p.Version))
	}
	slices.Sort(out)
	return out
}

func vid(f *fixture, counter int64) string {
	return fmt.Sprintf("%x-%d", f.self[:], counter)
}

func TestTrustedClean(t *testing.T) {
	f := filled(t)
	rep := f.check(ReadData{})
	if !rep.Clean() || rep.Records != 4 || rep.Versions != 4 || rep.Chunks != 5 || rep.BytesRead != 0 || rep.Mode != "metadata" {
		t.Fatalf("metadata check of a whole store: %+v", rep)
	}
	rep = f.check(ReadData{All: true})
	if !rep.Clean() || rep.BytesRead == 0 || f.s.fetch.Load() != 5 {
		t.Fatalf("read-data check of a whole store: %+v after %d fetches", rep, f.s.fetch.Load())
	}
}

func TestTrustedMissingChunk(t *testing.T) {
	f := filled(t)
	id := f.keys.ChunkID(chunk.HashOf([]byte("bravo two")))
	delete(f.s.chunks, id)
	rep := f.check(ReadData{})
	want := []string{"missing b.txt " + vid(f, 2)}
	if got := problems(rep); !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q", got, want)
	}
	if rep.Problems[0].Object != "chunk "+id.String() {
		t.Fatalf("problem names %q, want the chunk", rep.Problems[0].Object)
	}
}

func TestTrustedDamagedChunk(t *testing.T) {
	f := filled(t)
	id := f.keys.ChunkID(chunk.HashOf([]byte("charlie")))
	f.s.chunks[id][len(f.s.chunks[id])/2] ^= 1
	if rep := f.check(ReadData{}); !rep.Clean() {
		t.Fatalf("a flipped byte is not visible without reading data, yet: %q", problems(rep))
	}
	rep := f.check(ReadData{All: true})
	want := []string{"damaged dir/c.txt " + vid(f, 4)}
	if got := problems(rep); !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q", got, want)
	}
	// A chunk the receiver lists but no longer serves.
	f = filled(t)
	f.s.unlist[id] = false
	delete(f.s.chunks, id)
	f.s.chunks[id] = nil
	f.s.unlist[id] = true
	rep = f.check(ReadData{All: true})
	if got := problems(rep); !slices.Equal(got, []string{"missing dir/c.txt " + vid(f, 4)}) {
		t.Fatalf("unserved chunk: problems %q", got)
	}
}

func TestTrustedOversizedChunk(t *testing.T) {
	f := filled(t)
	id := f.keys.ChunkID(chunk.HashOf([]byte("alpha")))
	f.s.chunks[id] = append(f.s.chunks[id], make([]byte, 4096)...)
	rep := f.check(ReadData{})
	if got := problems(rep); !slices.Equal(got, []string{"damaged a.txt " + vid(f, 1)}) {
		t.Fatalf("problems %q", got)
	}
}

func TestTrustedWithheldRecord(t *testing.T) {
	f := filled(t)
	f.s.log = slices.Delete(f.s.log, 2, 3) // a.txt's second version
	rep := f.check(ReadData{})
	got := problems(rep)
	if len(got) != 2 || got[0] != "missing a.txt "+vid(f, 3) || got[1] != "rolled-back  " {
		t.Fatalf("problems %q, want a.txt's newest version missing and the checkpoint failing", got)
	}
}

func TestTrustedRolledBackLog(t *testing.T) {
	f := filled(t)
	rep := f.checkKnowing(ReadData{}, Known{LogID: f.s.logID, Cursor: f.s.last + 3, Held: f.seq})
	if got := problems(rep); !slices.Equal(got, []string{"rolled-back  "}) {
		t.Fatalf("a log shorter than read before: problems %q", got)
	}
	rep = f.checkKnowing(ReadData{}, Known{LogID: 5, Cursor: f.s.last, Held: f.seq})
	if got := problems(rep); !slices.Equal(got, []string{"rolled-back  "}) {
		t.Fatalf("a log that started over: problems %q", got)
	}
}

func TestTrustedForkAndTamper(t *testing.T) {
	f := filled(t)
	// A record under this device's name it never sealed.
	r := index.Record{Name: "ghost", Type: index.File, Sequence: 99, Version: index.Vector{{ID: f.self.Short(), Value: 99}}}
	sr, err := sealed.Seal(f.keys, folder, f.self, &r, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.s.last++
	sr.Sequence = f.s.last
	f.s.log = append(f.s.log, sr)
	// And a record whose sealed bytes were changed.
	f.s.log[1].Sealed = bytes.Clone(f.s.log[1].Sealed)
	f.s.log[1].Sealed[10] ^= 1
	rep := f.check(ReadData{})
	kinds := rep.Counts()
	if kinds[Forked] != 1 || kinds[Damaged] != 1 {
		t.Fatalf("problems %q, want one forked and one damaged", problems(rep))
	}
	for _, p := range rep.Problems {
		if p.Kind == Damaged && p.Object != "log 2" {
			t.Fatalf("tampered record reported as %q", p.Object)
		}
	}
}

func TestTrustedSubset(t *testing.T) {
	f := newFixture(t)
	for i := range 40 {
		f.write(fmt.Sprintf("f%02d", i), i == 39, fmt.Sprintf("content %d", i))
	}
	rep := f.check(ReadData{Percent: 25})
	if !rep.Clean() || f.s.fetch.Load() != 10 || rep.Mode != "read-data-subset" {
		t.Fatalf("25%% of 40 chunks: %d fetched, report %+v", f.s.fetch.Load(), rep)
	}
	f.s.fetch.Store(0)
	rep = f.check(ReadData{Bytes: 1})
	if f.s.fetch.Load() != 1 || rep.BytesRead == 0 {
		t.Fatalf("a 1-byte subset fetched %d chunks", f.s.fetch.Load())
	}
}

func TestTrustedRepair(t *testing.T) {
	f := filled(t)
	bravo := f.keys.ChunkID(chunk.HashOf([]byte("bravo two")))
	alpha := f.keys.ChunkID(chunk.HashOf([]byte("alpha")))
	charlie := f.keys.ChunkID(chunk.HashOf([]byte("charlie")))
	good := bytes.Clone(f.s.chunks[bravo])
	f.s.short[bravo] = true   // served cut short: repairable
	f.s.chunks[alpha][5] ^= 1 // reads whole, does not open: never replaced
	f.s.short[charlie] = true // cut short, and nobody has it
	asked := map[crypt.ChunkID]bool{}
	repair := func(_ context.Context, id crypt.ChunkID, hash [32]byte, size int64) ([]byte, string, error) {
		asked[id] = true
		if id == bravo && hash == chunk.HashOf([]byte("bravo two")) && size == int64(len(good)) {
			return good, "a test", nil
		}
		return nil, "", fmt.Errorf("nobody has it")
	}
	rep, err := Trusted(context.Background(), f.s.request, Options{Folder: folder, Receiver: crypt.DeviceID{9}, Self: f.self, Keys: f.keys,
		Known: Known{LogID: f.s.logID, Cursor: f.s.last, Held: f.seq, LocalSequence: f.seq}, ReadData: ReadData{All: true}, Repair: repair})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || asked[alpha] || len(rep.Repaired) != 1 || !strings.Contains(rep.Repaired[0], "b.txt (from a test)") || len(rep.Unrepaired) != 2 {
		t.Fatalf("repair asked for %v, repaired %q, not %q", asked, rep.Repaired, rep.Unrepaired)
	}
	for _, u := range rep.Unrepaired {
		if !strings.Contains(u, "a.txt: the receiver's copy reads whole") && !strings.Contains(u, "c.txt: nobody has it") {
			t.Errorf("unrepaired %q", u)
		}
	}
	if rep.Clean() {
		t.Fatal("a report that found damage says clean after repairing it")
	}
	again := f.check(ReadData{All: true})
	if got := problems(again); !slices.Equal(got, []string{"damaged a.txt " + vid(f, 1), "damaged dir/c.txt " + vid(f, 4)}) {
		t.Fatalf("after the repair the check finds %q; want only the chunks not repaired", got)
	}
}

// TestTrustedHostilePages: a receiver whose pages repeat, go back, claim
// more and send nothing, or pass the log's end, stops the check at once
// with ErrHostile.
func TestTrustedHostilePages(t *testing.T) {
	f := filled(t)
	known := Known{LogID: f.s.logID, Cursor: f.s.last, Held: f.seq, LocalSequence: f.seq}
	cases := map[string]func(req *protocol.Request) ([]byte, bool){
		"the same log page again and again": func(req *protocol.Request) ([]byte, bool) {
			if req.GetKind() != protocol.RequestKind_REQUEST_KIND_LOG_READ {
				return nil, false
			}
			b, _ := marshal(&protocol.LogPage{LogId: f.s.logID, LastSequence: f.s.last, More: true, Records: f.s.log[:2]})
			return b, true
		},
		"an empty log page with more": func(req *protocol.Request) ([]byte, bool) {
			if req.GetKind() != protocol.RequestKind_REQUEST_KIND_LOG_READ {
				return nil, false
			}
			b, _ := marshal(&protocol.LogPage{LogId: f.s.logID, LastSequence: f.s.last, More: true})
			return b, true
		},
		"a record past the log's end": func(req *protocol.Request) ([]byte, bool) {
			if req.GetKind() != protocol.RequestKind_REQUEST_KIND_LOG_READ {
				return nil, false
			}
			b, _ := marshal(&protocol.LogPage{LogId: f.s.logID, LastSequence: 1, Records: f.s.log[:2]})
			return b, true
		},
		"the same chunk page again and again": func(req *protocol.Request) ([]byte, bool) {
			if req.GetKind() != protocol.RequestKind_REQUEST_KIND_CHUNK_LIST {
				return nil, false
			}
			var id crypt.ChunkID
			for k := range f.s.chunks {
				id = k
				break
			}
			b, _ := marshal(&protocol.ChunkList{More: true, Chunks: []*protocol.ChunkEntry{{Id: id[:], Size: 100}}})
			return b, true
		},
	}
	for name, hostile := range cases {
		t.Run(name, func(t *testing.T) {
			requests := 0
			req := func(ctx context.Context, r *protocol.Request) ([]byte, error) {
				if requests++; requests > 100 {
					t.Fatal("the check keeps asking")
				}
				if b, ok := hostile(r); ok {
					return b, nil
				}
				return f.s.request(ctx, r)
			}
			_, err := Trusted(context.Background(), req, Options{Folder: folder, Receiver: crypt.DeviceID{9}, Self: f.self, Keys: f.keys, Known: known})
			if !errors.Is(err, ErrHostile) {
				t.Fatalf("check: %v, want ErrHostile", err)
			}
		})
	}
}

// TestTrustedSeenWithheld: a log cut short, whose end the receiver still
// claims, is found from the versions this device read there before.
func TestTrustedSeenWithheld(t *testing.T) {
	f := filled(t)
	f.write("e.txt", false, "echo") // not yet acknowledged: Held stays below
	held := f.seq - 1
	withheld := f.s.log[len(f.s.log)-1]
	f.s.log = f.s.log[:len(f.s.log)-1]
	seen := func(fn func(index.Record)) {
		for _, r := range f.local {
			fn(r) // the fixture's log sequences are its local ones
		}
	}
	rep, err := Trusted(context.Background(), f.s.request, Options{Folder: folder, Receiver: crypt.DeviceID{9}, Self: f.self, Keys: f.keys,
		Known: Known{LogID: f.s.logID, Cursor: f.s.last, Held: int64(held), LocalSequence: f.seq, Seen: seen}})
	if err != nil {
		t.Fatal(err)
	}
	if got := problems(rep); !slices.Equal(got, []string{"missing e.txt "}) {
		t.Fatalf("problems %q; want e.txt's withheld version (log %d)", got, withheld.GetSequence())
	}
}

// TestTrustedPruneRace: a version the receiver prunes between the log and
// the chunk list, with its chunks, is no loss and no problem.
func TestTrustedPruneRace(t *testing.T) {
	f := filled(t)
	alpha := f.keys.ChunkID(chunk.HashOf([]byte("alpha")))
	req := func(ctx context.Context, r *protocol.Request) ([]byte, error) {
		if r.GetKind() == protocol.RequestKind_REQUEST_KIND_CHUNK_LIST && f.s.chunks[alpha] != nil {
			// The prune: a.txt's first version, then its chunk.
			f.s.log = slices.Delete(f.s.log, 0, 1)
			delete(f.s.chunks, alpha)
		}
		return f.s.request(ctx, r)
	}
	rep, err := Trusted(context.Background(), req, Options{Folder: folder, Receiver: crypt.DeviceID{9}, Self: f.self, Keys: f.keys,
		Known: Known{LogID: f.s.logID, Cursor: f.s.last, Held: f.seq, LocalSequence: f.seq}})
	if err != nil || !rep.Clean() {
		t.Fatalf("a prune during the check: %q, %v; want clean", problems(rep), err)
	}
}
