package sealed

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

func TestCheckpointRoundTrip(t *testing.T) {
	keys := testKeys(t, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	r := randomRecord(rng)
	r.Sequence = 7
	d := NewDigest(keys)
	d.Add(keys.FileKey("a"), 3)
	d.Add(keys.FileKey(r.Name), 7)
	cp := d.Checkpoint(9, time.Unix(100, 5))
	sr, err := SealWith(keys, "f", crypt.DeviceID{1}, &r, 0, &cp)
	if err != nil {
		t.Fatal(err)
	}
	o, err := OpenAll(keys, "f", sr)
	if err != nil {
		t.Fatal(err)
	}
	if o.Checkpoint == nil || *o.Checkpoint != cp {
		t.Fatalf("checkpoint %+v, sealed %+v", o.Checkpoint, cp)
	}
	if !d.Matches(*o.Checkpoint) {
		t.Fatal("the digest does not match its own checkpoint")
	}
	// The same marks in another order match; one mark more or less, or
	// another counter, does not.
	e := NewDigest(keys)
	e.Add(keys.FileKey(r.Name), 7)
	e.Add(keys.FileKey("a"), 3)
	if !e.Matches(cp) {
		t.Fatal("order changed the digest")
	}
	e.Add(keys.FileKey("b"), 1)
	if e.Matches(cp) {
		t.Fatal("a mark more matches")
	}
	f := NewDigest(keys)
	f.Add(keys.FileKey(r.Name), 7)
	f.Add(keys.FileKey("a"), 2)
	if f.Matches(cp) {
		t.Fatal("an older counter matches")
	}
	// Another folder key marks differently.
	g := NewDigest(testKeys(t, 2))
	g.Add(keys.FileKey(r.Name), 7)
	g.Add(keys.FileKey("a"), 3)
	if g.Matches(cp) {
		t.Fatal("marks do not depend on the key")
	}
	// Records without one open with none.
	sr, err = Seal(keys, "f", crypt.DeviceID{1}, &r, 0)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := OpenAll(keys, "f", sr); err != nil || o.Checkpoint != nil {
		t.Fatalf("a record without a checkpoint: %+v, %v", o.Checkpoint, err)
	}
}

// TestCheckpointMalformed: a checkpoint that cannot be right refuses its
// record (only a holder of the key could have sealed it).
func TestCheckpointMalformed(t *testing.T) {
	keys := testKeys(t, 1)
	r := randomRecord(rand.New(rand.NewPCG(5, 6)))
	r.Sequence = 10
	for _, tc := range []struct {
		name string
		cp   *protocol.Checkpoint
	}{
		{"short digest", &protocol.Checkpoint{Counter: 10, Digest: make([]byte, 31), TimeNs: 1}},
		{"counter below the record's", &protocol.Checkpoint{Counter: 9, Digest: make([]byte, 32), TimeNs: 1}},
		{"no time", &protocol.Checkpoint{Counter: 10, Digest: make([]byte, 32)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload, err := proto.Marshal(&protocol.SealedPayload{File: indexToWire(&r), Checkpoint: tc.cp})
			if err != nil {
				t.Fatal(err)
			}
			sr := sealRaw(t, keys, "f", crypt.DeviceID{1}, &r, payload)
			if _, err := OpenAll(keys, "f", sr); !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("opened with %v, want ErrCheckpoint", err)
			}
		})
	}
}

func indexToWire(r *index.Record) *protocol.FileInfo { return index.ToWire(r) }

// sealRaw seals payload as r's record, with clear fields that agree with r.
func sealRaw(t *testing.T, keys *crypt.Keys, folder string, origin crypt.DeviceID, r *index.Record, payload []byte) *protocol.SealedRecord {
	t.Helper()
	h := crypt.RecordHeader{Folder: folder, File: keys.FileKey(r.Name), Origin: origin, Counter: uint64(r.Sequence)}
	body, err := keys.SealRecord(h, payload)
	if err != nil {
		t.Fatal(err)
	}
	sr := &protocol.SealedRecord{Sequence: r.Sequence, Origin: origin[:], Counter: h.Counter, FileKey: h.File[:], Sealed: body, Deleted: r.Deleted}
	if !r.Deleted && r.Type == index.File {
		for _, b := range r.Blocks {
			id := keys.ChunkID(b.Hash)
			sr.Chunks = append(sr.Chunks, id[:])
		}
	}
	return sr
}
