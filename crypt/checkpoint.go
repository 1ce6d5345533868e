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
//
// Marks are keyed with the checkpoint key of generation gen (the format
// byte of the record that carries the checkpoint); an unknown generation
// is ErrNewerKey.
func (k *Keys) CheckpointMark(gen byte, fk FileKey, counter uint64) ([32]byte, error) {
	g, err := k.generation(gen)
	if err != nil {
		return [32]byte{}, err
	}
	m := g.markMACs.Get().(hash.Hash)
	m.Reset()
	m.Write(fk[:])
	var c [8]byte
	binary.BigEndian.PutUint64(c[:], counter)
	m.Write(c[:])
	var out [32]byte
	m.Sum(out[:0])
	g.markMACs.Put(m)
	return out, nil
}
