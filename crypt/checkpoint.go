package crypt

import (
	"encoding/binary"
	"hash"
)

// CheckpointMark is one record's share of a checkpoint digest:
// HMAC-SHA256(checkpoint key, file key || counter as 8 bytes big-endian).
// A checkpoint XORs the marks of the records it covers; keyed, so that a
// receiver, which sees file keys and counters, cannot pick records whose
// marks cancel out.
func (k *Keys) CheckpointMark(fk FileKey, counter uint64) [32]byte {
	m := k.markMACs.Get().(hash.Hash)
	m.Reset()
	m.Write(fk[:])
	var c [8]byte
	binary.BigEndian.PutUint64(c[:], counter)
	m.Write(c[:])
	var out [32]byte
	m.Sum(out[:0])
	k.markMACs.Put(m)
	return out
}
