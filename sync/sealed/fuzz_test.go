package sealed

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

// fuzzKeys returns the keys of the vectors' first folder key, the one most
// vectors are opened with, and the vectors.
func fuzzKeys(f *testing.F) (*crypt.Keys, *vectors) {
	f.Helper()
	v := readVectors(f)
	k, err := crypt.DeriveKeys(crypt.FolderKey(unhex(f, v.Vectors[0].FolderKey)))
	if err != nil {
		f.Fatal(err)
	}
	return k, v
}

// FuzzOpen: arbitrary SealedRecord bytes never panic and fail only with a
// documented error; a record that opens is one Seal makes: sealed again, it
// has the same clear fields and opens to the same record.
func FuzzOpen(f *testing.F) {
	keys, v := fuzzKeys(f)
	for _, c := range v.Vectors {
		b, err := proto.Marshal(c.Record.proto(f))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c.Folder, b)
	}
	f.Fuzz(func(t *testing.T, folder string, b []byte) {
		var sr protocol.SealedRecord
		if proto.Unmarshal(b, &sr) != nil {
			return
		}
		r, err := Open(keys, folder, &sr)
		if err != nil {
			if e := expectOf(err); strings.HasPrefix(e, "unexpected") {
				t.Fatalf("undocumented error %v", err)
			}
			return
		}
		again, err := Seal(keys, folder, crypt.DeviceID(sr.Origin), &r, 7)
		if err != nil {
			t.Fatal(err)
		}
		if !sameClearFields(again, &sr) {
			t.Fatalf("resealed, the clear fields differ:\n%v\n%v", again, &sr)
		}
		if back, err := Open(keys, folder, again); err != nil || !equalRecords(&back, &r) {
			t.Fatalf("resealed, it opens to %+v (%v), not %+v", back, err, r)
		}
	})
}

// Ways FuzzOpenPayload makes the clear fields disagree with the record.
const (
	wrongCounter = 1 << iota
	wrongDeleted
	wrongChunks
	wrongName
)

// FuzzOpenPayload reaches past the AEAD: it seals arbitrary payload bytes
// with clear fields that agree with the record inside (or, by the bits of
// wrong, do not). Open must accept exactly what index.FromWire accepts
// when they agree, refuse it when they do not, and say why.
func FuzzOpenPayload(f *testing.F) {
	keys, v := fuzzKeys(f)
	for _, c := range v.Vectors {
		if c.FolderKey != v.Vectors[0].FolderKey || c.Folder != v.Vectors[0].Folder {
			continue
		}
		sr := c.Record.proto(f)
		if len(sr.Origin) != len(crypt.DeviceID{}) || len(sr.FileKey) != len(crypt.FileKey{}) {
			continue
		}
		h := crypt.RecordHeader{Folder: c.Folder, Origin: crypt.DeviceID(sr.Origin), File: crypt.FileKey(sr.FileKey), Counter: sr.Counter}
		if payload, err := keys.OpenRecord(h, sr.Sealed); err == nil {
			f.Add(payload, uint8(0))
			f.Add(payload, uint8(wrongCounter|wrongChunks))
		}
	}
	stranger := keys.ChunkID(chunk.HashOf([]byte("stranger")))
	origin := crypt.DeviceID{9}
	f.Fuzz(func(t *testing.T, payload []byte, wrong uint8) {
		var p protocol.SealedPayload
		perr := proto.Unmarshal(payload, &p)
		fi := p.GetFile()
		h := crypt.RecordHeader{Folder: "docs", File: keys.FileKey(fi.GetName()), Origin: origin, Counter: uint64(fi.GetSequence())}
		sr := &protocol.SealedRecord{Origin: origin[:], Deleted: fi.GetDeleted()}
		for _, b := range fi.GetBlocks() {
			var hash chunk.Hash
			copy(hash[:], b.GetHash())
			id := keys.ChunkID(hash)
			sr.Chunks = append(sr.Chunks, id[:])
		}
		if wrong&wrongCounter != 0 {
			h.Counter++
		}
		if wrong&wrongDeleted != 0 {
			sr.Deleted = !sr.Deleted
		}
		if wrong&wrongChunks != 0 {
			sr.Chunks = append(sr.Chunks, stranger[:])
		}
		if wrong&wrongName != 0 {
			h.File = keys.FileKey(fi.GetName() + "x")
		}
		sealed, err := keys.SealRecord(h, payload)
		if err != nil {
			t.Fatal(err)
		}
		sr.Sealed, sr.FileKey, sr.Counter = sealed, h.File[:], h.Counter
		r, err := Open(keys, "docs", sr)
		if perr != nil {
			if !errors.Is(err, ErrPayload) {
				t.Fatalf("a payload protobuf refuses (%v) opened with %v", perr, err)
			}
			return
		}
		want, werr := index.FromWire(fi)
		switch {
		case werr != nil:
			if !errors.Is(err, ErrRecord) {
				t.Fatalf("a record FromWire refuses (%v) opened with %v", werr, err)
			}
		case wrong&(wrongCounter|wrongDeleted|wrongChunks|wrongName) != 0:
			e := expectOf(err)
			if e != "file key" && e != "deleted flag" && e != "counter" && e != "chunk list" {
				t.Fatalf("clear fields changed by %#x: %v", wrong, err)
			}
		case err != nil:
			t.Fatalf("a valid record with agreeing clear fields: %v", err)
		case !equalRecords(&r, &want):
			t.Fatalf("opened %+v, FromWire makes %+v", r, want)
		}
	})
}
