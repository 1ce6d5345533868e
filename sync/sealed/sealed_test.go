package sealed

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/index"
)

// The rejections Open makes, and what records of each kind open to, are
// pinned by testdata/vectors.json (vectors_test.go). This file checks that
// what Seal makes, Open gives back.

func testKeys(t testing.TB, b byte) *crypt.Keys {
	t.Helper()
	k, err := crypt.DeriveKeys(crypt.FolderKey{b})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// nameParts are components of the names randomRecord makes: plain,
// non-ASCII, spaced, dotted, and one of the longest allowed.
var nameParts = []string{
	"a", "notes", "todo.txt", "ünï file", "日本語", "emoji 🎉", "with space", ".hidden",
	"...", "lockstep", "-", "CON", strings.Repeat("n", 255),
}

// randomRecord returns a valid record of any kind: a file of 0 to 5
// blocks of sizes from 1 byte to chunk.MaxSize, a directory or a symlink,
// any of them possibly deleted, with varied modes, times, versions and
// sequences, boundaries included.
func randomRecord(rng *rand.Rand) index.Record {
	var parts []string
	for range 1 + rng.IntN(4) {
		parts = append(parts, nameParts[rng.IntN(len(nameParts))])
	}
	var v index.Vector
	for range 1 + rng.IntN(4) {
		v = append(v, index.Counter{ID: crypt.ShortID(rng.Uint64()), Value: 1 + rng.Uint64N(uint64(time.Now().Unix()))})
	}
	r := index.Record{
		Name:       strings.Join(parts, "/"),
		Type:       index.Type(rng.IntN(3)),
		Mode:       uint32(rng.IntN(0o10000)) & index.PeerModeMask,
		ModTime:    int64(rng.Uint64()),
		Deleted:    rng.IntN(5) == 0,
		Version:    index.Canonical(v),
		Sequence:   []int64{0, 1, math.MaxInt64, rng.Int64()}[rng.IntN(4)],
		ModifiedBy: crypt.ShortID(rng.Uint64()),
	}
	switch {
	case r.Deleted:
	case r.Type == index.File:
		r.Blocks = []index.Block{} // what FromWire makes of a file without blocks
		for range rng.IntN(6) {
			b := index.Block{Offset: r.Size, Size: []uint32{1, chunk.MaxSize, 1 + rng.Uint32N(chunk.MaxSize)}[rng.IntN(3)]}
			for i := range b.Hash {
				b.Hash[i] = byte(rng.Uint32())
			}
			r.Blocks = append(r.Blocks, b)
			r.Size += int64(b.Size)
		}
	case r.Type == index.Symlink:
		r.Target = []string{"x", "../../elsewhere", "/abs/olute", strings.Repeat("t", 4096)}[rng.IntN(4)]
	}
	return r
}

func TestSealOpenRoundTrip(t *testing.T) {
	keys := testKeys(t, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	origin := crypt.DeviceID{9}
	for i := range 2000 {
		r := randomRecord(rng)
		folder := []string{"f", "", "docs/ünï"}[i%3]
		sr, err := Seal(keys, folder, origin, &r, 7)
		if err != nil {
			t.Fatal(err)
		}
		wantChunks := 0
		if r.Type == index.File && !r.Deleted {
			wantChunks = len(r.Blocks)
		}
		if sr.Sequence != r.Sequence || sr.Counter != uint64(r.Sequence) || sr.Deleted != r.Deleted ||
			len(sr.Chunks) != wantChunks || crypt.FileKey(sr.FileKey) != keys.FileKey(r.Name) || crypt.DeviceID(sr.Origin) != origin {
			t.Fatalf("record %d (%q, %v, deleted %v, %d blocks, sequence %d): clear fields: sequence %d counter %d deleted %v %d chunks",
				i, r.Name, r.Type, r.Deleted, len(r.Blocks), r.Sequence, sr.Sequence, sr.Counter, sr.Deleted, len(sr.Chunks))
		}
		got, err := Open(keys, folder, sr)
		if err != nil {
			t.Fatalf("record %d (%q, %v): %v", i, r.Name, r.Type, err)
		}
		if !equalRecords(&got, &r) {
			t.Fatalf("record %d: sealed\n%+v\nopened\n%+v", i, r, got)
		}
	}
}

// TestRecordSizeClasses: records of small files, directories, symlinks and
// deletions seal to one length whatever their names' lengths, and larger
// ones to a power of two, so a receiver learns little from a record's
// length (before, it followed the name to about 8 bytes).
func TestRecordSizeClasses(t *testing.T) {
	keys, err := crypt.DeriveKeys(crypt.FolderKey{1})
	if err != nil {
		t.Fatal(err)
	}
	sealedLen := func(r index.Record) int {
		t.Helper()
		sr, err := Seal(keys, "f", crypt.DeviceID{9}, &r, 7)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Open(keys, "f", sr); err != nil {
			t.Fatal(err)
		}
		return len(sr.Sealed)
	}
	data := []byte("hello world")
	file := index.Record{
		Type: index.File, Size: int64(len(data)), Mode: 0o640, ModTime: 1700000000123456789,
		Version: index.Vector{{ID: 3, Value: 7}, {ID: 9, Value: 1}}, Sequence: 42, ModifiedBy: 9,
		Blocks: []index.Block{{Offset: 0, Size: uint32(len(data)), Hash: chunk.HashOf(data)}},
	}
	lens := map[int][]string{}
	for _, name := range []string{"a", "a/b/c.txt", strings.Repeat("n", 200), "dir/" + strings.Repeat("é", 100)} {
		f := file
		f.Name = name
		d := index.Record{Name: name, Type: index.Dir, Mode: 0o755, Version: file.Version, Sequence: 3}
		s := index.Record{Name: name, Type: index.Symlink, Target: "../" + name, Version: file.Version, Sequence: 4}
		del := f
		del.Deleted, del.Blocks, del.Size = true, nil, 0
		for kind, r := range map[string]index.Record{"file": f, "dir": d, "symlink": s, "deletion": del} {
			n := sealedLen(r)
			lens[n] = append(lens[n], kind+" "+name[:min(len(name), 10)])
		}
	}
	if len(lens) != 1 {
		t.Fatalf("small records seal to %d lengths: %v", len(lens), lens)
	}
	big := file
	big.Name = "big.bin"
	for i := range 60 {
		big.Blocks = append(big.Blocks, index.Block{Offset: int64(i) * 11, Size: 11, Hash: file.Blocks[0].Hash})
	}
	big.Blocks = big.Blocks[1:]
	big.Size = int64(len(big.Blocks)) * 11
	for i := range big.Blocks {
		big.Blocks[i].Offset = int64(i) * 11
	}
	n := sealedLen(big)
	if inner := n - (1 + 24 + 16); inner&(inner-1) != 0 {
		t.Errorf("a record of %d blocks seals to %d bytes: inner %d is not a power of two", len(big.Blocks), n, inner)
	}
}
