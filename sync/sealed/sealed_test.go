package sealed

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

func sampleRecord() index.Record {
	data := []byte("hello world")
	return index.Record{
		Name: "dir/ünï file.txt", Type: index.File, Size: int64(len(data)), Mode: 0o640,
		ModTime: 1700000000123456789, Version: index.Vector{{ID: 3, Value: 7}, {ID: 9, Value: 1}},
		Blocks:   []index.Block{{Offset: 0, Size: uint32(len(data)), Hash: chunk.HashOf(data)}},
		Sequence: 42, ModifiedBy: 9,
	}
}

func testKeys(t *testing.T, b byte) *crypt.Keys {
	t.Helper()
	k, err := crypt.DeriveKeys(crypt.FolderKey{b})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sealFor builds a sealed record the way a trusted device's upload does,
// with hooks to break it the ways a hostile receiver or sender might.
func sealFor(t *testing.T, keys *crypt.Keys, folder string, r index.Record, name string, counter uint64) *protocol.SealedRecord {
	t.Helper()
	payload, err := proto.Marshal(&protocol.SealedPayload{File: index.ToWire(&r), Polynomial: 7})
	if err != nil {
		t.Fatal(err)
	}
	origin := crypt.DeviceID{9}
	fk := keys.FileKey(name)
	sealed, err := keys.SealRecord(crypt.RecordHeader{Folder: folder, File: fk, Origin: origin, Counter: counter}, payload)
	if err != nil {
		t.Fatal(err)
	}
	sr := &protocol.SealedRecord{Sequence: 5, Origin: origin[:], Counter: counter, FileKey: fk[:], Sealed: sealed, Deleted: r.Deleted}
	for _, b := range r.Blocks {
		id := keys.ChunkID(b.Hash)
		sr.Chunks = append(sr.Chunks, id[:])
	}
	return sr
}

func TestOpen(t *testing.T) {
	keys := testKeys(t, 1)
	r := sampleRecord()
	good := sealFor(t, keys, "f", r, r.Name, uint64(r.Sequence))
	got, err := Open(keys, "f", good)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != r.Name || got.Sequence != r.Sequence || !got.SameContent(&r) {
		t.Fatalf("opened %+v, sealed %+v", got, r)
	}

	flipped := proto.Clone(good).(*protocol.SealedRecord)
	flipped.Sealed[len(flipped.Sealed)/2] ^= 1
	truncated := proto.Clone(good).(*protocol.SealedRecord)
	truncated.Sealed = truncated.Sealed[:len(truncated.Sealed)-3]
	otherCounter := proto.Clone(good).(*protocol.SealedRecord)
	otherCounter.Counter++
	otherOrigin := proto.Clone(good).(*protocol.SealedRecord)
	otherOrigin.Origin = bytes.Repeat([]byte{8}, 32)
	otherChunks := proto.Clone(good).(*protocol.SealedRecord)
	otherChunks.Chunks[0] = bytes.Repeat([]byte{1}, 32)
	noChunks := proto.Clone(good).(*protocol.SealedRecord)
	noChunks.Chunks = nil
	flagged := proto.Clone(good).(*protocol.SealedRecord)
	flagged.Deleted = true
	shortKey := proto.Clone(good).(*protocol.SealedRecord)
	shortKey.FileKey = shortKey.FileKey[:5]
	shortOrigin := proto.Clone(good).(*protocol.SealedRecord)
	shortOrigin.Origin = nil
	cases := map[string]struct {
		keys   *crypt.Keys
		folder string
		sr     *protocol.SealedRecord
	}{
		"flipped bit":                  {keys, "f", flipped},
		"truncated":                    {keys, "f", truncated},
		"other folder":                 {keys, "g", good},
		"other key":                    {testKeys(t, 2), "f", good},
		"counter changed":              {keys, "f", otherCounter},
		"origin changed":               {keys, "f", otherOrigin},
		"chunk list swapped":           {keys, "f", otherChunks},
		"chunk list dropped":           {keys, "f", noChunks},
		"deletion flag set":            {keys, "f", flagged},
		"short file key":               {keys, "f", shortKey},
		"no origin":                    {keys, "f", shortOrigin},
		"filed under another name":     {keys, "f", sealFor(t, keys, "f", r, "other", uint64(r.Sequence))},
		"counter is not its sequence":  {keys, "f", sealFor(t, keys, "f", r, r.Name, uint64(r.Sequence)+1)},
		"hostile name inside a record": {keys, "f", sealFor(t, keys, "f", index.Record{Name: "../x", Version: r.Version, Sequence: 1}, "../x", 1)},
	}
	for name, c := range cases {
		if _, err := Open(c.keys, c.folder, c.sr); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
	if _, err := Open(keys, "f", flipped); !errors.Is(err, crypt.ErrAuth) {
		t.Errorf("flipped bit: %v, want crypt.ErrAuth", err)
	}
}

