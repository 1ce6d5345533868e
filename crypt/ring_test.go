package crypt

import (
	"bytes"
	"errors"
	"testing"
)

// TestRing: after a rotation, names, chunk IDs and the polynomial stay
// (files keep their keys, chunks dedupe); what the new key seals, the old
// ring cannot open (ErrNewerKey, which is also ErrFormat to it); what the
// old key sealed, the new ring still opens.
func TestRing(t *testing.T) {
	k1 := fixedFolderKey()
	k2 := k1
	k2[0] ^= 0xff
	old := testKeys(t)
	ring, err := DeriveRing([]FolderKey{k1, k2})
	if err != nil {
		t.Fatal(err)
	}
	if ring.Generation() != 2 || old.Generation() != 1 {
		t.Fatalf("generations %d, %d", ring.Generation(), old.Generation())
	}
	if ring.FileKey("a/b") != old.FileKey("a/b") || ring.Polynomial() != old.Polynomial() || ring.ChunkID([32]byte{1}) != old.ChunkID([32]byte{1}) {
		t.Fatal("a rotation changed names, chunk IDs or the polynomial")
	}
	h := RecordHeader{Folder: "f", File: old.FileKey("a"), Origin: DeviceID{1}, Counter: 1}

	newRec, err := ring.SealRecord(h, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if RecordGeneration(newRec) != 2 {
		t.Fatalf("record generation %d", RecordGeneration(newRec))
	}
	if _, err := old.OpenRecord(h, newRec); !errors.Is(err, ErrNewerKey) || !errors.Is(err, ErrFormat) {
		t.Fatalf("the old key opened a new record: %v", err)
	}
	// Relabelled as generation 1, it does not open under the old key.
	relabel := bytes.Clone(newRec)
	relabel[0] = 1
	if _, err := old.OpenRecord(h, relabel); !errors.Is(err, ErrAuth) {
		t.Fatalf("a new record relabelled: %v", err)
	}
	if _, err := ring.OpenRecord(h, relabel); !errors.Is(err, ErrAuth) {
		t.Fatalf("a new record relabelled, under the ring: %v", err)
	}
	oldRec, err := old.SealRecord(h, []byte("old payload"))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := ring.OpenRecord(h, oldRec); err != nil || string(p) != "old payload" {
		t.Fatalf("the ring does not open an old record: %q, %v", p, err)
	}

	plain := bytes.Repeat([]byte("chunk "), 1000)
	id, newChunk := sealed(t, ring, plain, true)
	if newChunk[0] != 2 {
		t.Fatalf("chunk generation %d", newChunk[0])
	}
	if _, err := old.OpenChunk(id, newChunk); !errors.Is(err, ErrNewerKey) {
		t.Fatalf("the old key opened a new chunk: %v", err)
	}
	relabel = bytes.Clone(newChunk)
	relabel[0] = 1
	if _, err := old.OpenChunk(id, relabel); !errors.Is(err, ErrAuth) {
		t.Fatalf("a new chunk relabelled: %v", err)
	}
	oldID, oldChunk := sealed(t, old, plain, true)
	if oldID != id {
		t.Fatal("a rotation changed the chunk ID")
	}
	if got, err := ring.OpenChunk(id, oldChunk); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("the ring does not open an old chunk: %v", err)
	}

	// Checkpoint marks are per generation.
	m1, err := ring.CheckpointMark(1, h.File, 3)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := ring.CheckpointMark(2, h.File, 3)
	if err != nil || m1 == m2 {
		t.Fatalf("marks of two generations: equal %v, %v", m1 == m2, err)
	}
	if o1, err := old.CheckpointMark(1, h.File, 3); err != nil || o1 != m1 {
		t.Fatalf("generation 1's mark differs between rings: %v", err)
	}
	if _, err := old.CheckpointMark(2, h.File, 3); !errors.Is(err, ErrNewerKey) {
		t.Fatalf("a mark of a generation the ring lacks: %v", err)
	}
	if _, err := DeriveRing(nil); err == nil {
		t.Fatal("an empty ring derived")
	}
}

func TestEnvelopeRing(t *testing.T) {
	k1 := fixedFolderKey()
	k2 := k1
	k2[5] ^= 1
	env, err := sealRing([]FolderKey{k1, k2}, []byte("pw"), testLogN, nil)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := openRing(env, []byte("pw"), testMaxLogN)
	if err != nil || len(ring) != 2 || ring[0] != k1 || ring[1] != k2 {
		t.Fatalf("ring %x, %v", ring, err)
	}
	if k, err := openEnvelope(env, []byte("pw"), testMaxLogN); err != nil || k != k1 {
		t.Fatalf("first key %x, %v", k, err)
	}
	if _, err := openRing(env, []byte("other"), testMaxLogN); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("a wrong password: %v", err)
	}
	one, err := sealEnvelope(k1, []byte("pw"), testLogN, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ring, err := openRing(one, []byte("pw"), testMaxLogN); err != nil || len(ring) != 1 || ring[0] != k1 {
		t.Fatalf("a single key's ring %x, %v", ring, err)
	}
	if _, err := sealRing(nil, []byte("pw"), testLogN, nil); err == nil {
		t.Fatal("an empty ring sealed")
	}
}
