package index

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/chunk"
	"lockstep/sync/protocol"
)

func sampleRecord() Record {
	data := []byte("hello world")
	return Record{
		Name: "dir/ünï file.txt", Type: File, Size: int64(len(data)), Mode: 0o640,
		ModTime: 1700000000123456789, Version: Vector{{ID: 3, Value: 7}, {ID: 9, Value: 1}},
		Blocks:   []Block{{Offset: 0, Size: uint32(len(data)), Hash: chunk.HashOf(data)}},
		Sequence: 42, ModifiedBy: 9,
	}
}

func TestWireRoundTrip(t *testing.T) {
	r := sampleRecord()
	got, err := FromWire(ToWire(&r))
	if err != nil {
		t.Fatal(err)
	}
	if !got.SameContent(&r) || got.Version.Compare(r.Version) != Equal || got.Sequence != 42 || got.ModifiedBy != 9 || got.Name != r.Name {
		t.Fatalf("round trip changed the record:\n%+v\n%+v", r, got)
	}
	link := Record{Name: "l", Type: Symlink, Target: "../x", Version: Vector{{ID: 1, Value: 1}}}
	if got, err := FromWire(ToWire(&link)); err != nil || got.Target != "../x" || got.Type != Symlink {
		t.Fatalf("symlink: %+v %v", got, err)
	}
}

func TestFromWireRefusesMalformed(t *testing.T) {
	mutate := func(f func(fi *protocol.FileInfo)) *protocol.FileInfo {
		r := sampleRecord()
		fi := ToWire(&r)
		f(fi)
		return fi
	}
	cases := map[string]*protocol.FileInfo{
		"dotdot":         mutate(func(fi *protocol.FileInfo) { fi.Name = "../x" }),
		"absolute":       mutate(func(fi *protocol.FileInfo) { fi.Name = "/etc/passwd" }),
		"internal":       mutate(func(fi *protocol.FileInfo) { fi.Name = ".lockstep/versions/x" }),
		"temp":           mutate(func(fi *protocol.FileInfo) { fi.Name = ".lockstep-tmp-1" }),
		"empty version":  mutate(func(fi *protocol.FileInfo) { fi.Version = nil }),
		"negative size":  mutate(func(fi *protocol.FileInfo) { fi.Size = -1 }),
		"size mismatch":  mutate(func(fi *protocol.FileInfo) { fi.Size++ }),
		"gap":            mutate(func(fi *protocol.FileInfo) { fi.Blocks[0].Offset = 1 }),
		"short hash":     mutate(func(fi *protocol.FileInfo) { fi.Blocks[0].Hash = fi.Blocks[0].Hash[:31] }),
		"huge block":     mutate(func(fi *protocol.FileInfo) { fi.Blocks[0].Size = chunk.MaxSize + 1; fi.Size = chunk.MaxSize + 1 }),
		"zero block":     mutate(func(fi *protocol.FileInfo) { fi.Blocks[0].Size = 0; fi.Size = 0 }),
		"unknown type":   mutate(func(fi *protocol.FileInfo) { fi.Type = 9 }),
		"dir blocks":     mutate(func(fi *protocol.FileInfo) { fi.Type = protocol.FileInfoType_FILE_INFO_TYPE_DIRECTORY }),
		"symlink empty":  mutate(func(fi *protocol.FileInfo) { fi.Type = protocol.FileInfoType_FILE_INFO_TYPE_SYMLINK; fi.Blocks = nil }),
		"deleted blocks": mutate(func(fi *protocol.FileInfo) { fi.Deleted = true }),
	}
	for name, fi := range cases {
		if _, err := FromWire(fi); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzFromWire: any record a peer sends either is refused or becomes a
// record whose name is valid and whose blocks tile its size exactly.
func FuzzFromWire(f *testing.F) {
	r := sampleRecord()
	seed, _ := proto.Marshal(ToWire(&r))
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var fi protocol.FileInfo
		if proto.Unmarshal(b, &fi) != nil {
			return
		}
		rec, err := FromWire(&fi)
		if err != nil {
			return
		}
		if strings.Contains(rec.Name, "..") && strings.Contains("/"+rec.Name+"/", "/../") {
			t.Fatalf("accepted %q", rec.Name)
		}
		var off int64
		for _, b := range rec.Blocks {
			if b.Offset != off || b.Size == 0 || b.Size > chunk.MaxSize {
				t.Fatalf("bad block %+v", b)
			}
			off += int64(b.Size)
		}
		if rec.Type == File && !rec.Deleted && off != rec.Size {
			t.Fatalf("blocks cover %d of %d", off, rec.Size)
		}
		if len(rec.Version) == 0 {
			t.Fatal("empty version accepted")
		}
	})
}

// TestFromWireRefusesFarCounters: a version counter far ahead of the
// clock (a hostile peer's 2^64-1) is refused; one a burst of edits puts
// a little ahead is taken.
func TestFromWireRefusesFarCounters(t *testing.T) {
	now := uint64(time.Now().Unix())
	for _, c := range []struct {
		value uint64
		ok    bool
	}{{now, true}, {now + 1000, true}, {now + maxCounterAhead + 3600, false}, {math.MaxUint64, false}} {
		r := sampleRecord()
		r.Version = Vector{{ID: 3, Value: c.value}}
		_, err := FromWire(ToWire(&r))
		if (err == nil) != c.ok {
			t.Errorf("counter %d: %v, want ok %v", c.value, err, c.ok)
		}
	}
}

// TestUpdateNeverWraps: a counter at the top stays there instead of
// wrapping to 0, which would make the edit lose to every older version.
func TestUpdateNeverWraps(t *testing.T) {
	v := Vector{{ID: 3, Value: math.MaxUint64}}.Update(3, 5)
	if got := v.Counter(3); got != math.MaxUint64 {
		t.Fatalf("counter after an update at the top: %d", got)
	}
}

// TestFromWireModes: a peer's mode never makes a file setuid, setgid,
// sticky or writable by others here.
func TestFromWireModes(t *testing.T) {
	r := sampleRecord()
	r.Mode = 0o7777
	got, err := FromWire(ToWire(&r))
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != 0o775 {
		t.Fatalf("mode 0o7777 from a peer became %o, want 775", got.Mode)
	}
}
