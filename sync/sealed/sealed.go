// Package sealed is the sealed-record format: what a trusted device makes
// of a file record before it crosses the trust boundary to an untrusted
// receiver, and the checks a record must pass when it comes back.
//
// A sealed record is a protocol.SealedRecord: in the clear, the origin
// device, its counter (the origin's sequence of the record), the keyed
// file key of the name (crypt.Keys.FileKey), the deletion flag and the
// keyed IDs of the chunks the record references (what a receiver needs to
// deduplicate, apply retention and serve chunks without any key); sealed,
// the whole record (a protocol.SealedPayload: the file record in wire
// form and the folder's chunking polynomial), authenticated together with
// a header of folder ID, file key, origin and counter (crypt.SealRecord).
//
// One record of each upload pass also carries a Checkpoint (checkpoint.go),
// by which a device recovering from the receiver finds records dropped or
// withheld.
//
// Invariants:
//   - Open accepts a record only if every clear field agrees with what
//     was sealed: the header opens the payload, the name's file key, the
//     counter, the deletion flag and the chunk list are those of the
//     record inside. A receiver can drop or replay whole records, never
//     change one, move it to another name, folder or origin, or change
//     what chunks it is taken to need.
//   - A record opened is checked as any peer's record is (index.FromWire):
//     a hostile name or block layout is refused.
//
// The package is a pure library: no goroutines, no I/O.
package sealed

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

// Errors Open returns for a record that opens but does not agree with its
// clear fields. A record that fails to open at all returns crypt's error.
var (
	ErrHeader    = errors.New("record header has a file key or origin of the wrong size")
	ErrPayload   = errors.New("record payload is malformed")
	ErrFileKey   = errors.New("record is filed under another name's key")
	ErrDeleted   = errors.New("record's readable deletion flag differs from its content")
	ErrCounter   = errors.New("record counter differs from its sequence")
	ErrChunkList = errors.New("record's chunk list differs from its blocks")
	// ErrRecord: the record opened, but index.FromWire refuses the file
	// record inside (hostile name, blocks that do not tile the file, unknown
	// type ...). The error also wraps FromWire's.
	ErrRecord = errors.New("sealed file record is invalid")
)

// Seal seals r, a record of origin's index of folderID (its Sequence is the
// counter), with the folder's chunking polynomial pol. The result's
// Sequence is r's; a sender renumbers it as its log needs.
func Seal(keys *crypt.Keys, folderID string, origin crypt.DeviceID, r *index.Record, pol uint64) (*protocol.SealedRecord, error) {
	return SealWith(keys, folderID, origin, r, pol, nil)
}

// SealWith is Seal that also seals cp (nil: none) into the record, for the
// record that ends an upload pass.
func SealWith(keys *crypt.Keys, folderID string, origin crypt.DeviceID, r *index.Record, pol uint64, cp *Checkpoint) (*protocol.SealedRecord, error) {
	p := &protocol.SealedPayload{File: index.ToWire(r), Polynomial: pol}
	if cp != nil {
		p.Checkpoint = cp.toWire()
	}
	p.Padding = make([]byte, paddingFor(proto.Size(p)))
	payload, err := proto.Marshal(p)
	if err != nil {
		return nil, err
	}
	fk := keys.FileKey(r.Name)
	h := crypt.RecordHeader{Folder: folderID, File: fk, Origin: origin, Counter: uint64(r.Sequence)}
	body, err := keys.SealRecord(h, payload)
	if err != nil {
		return nil, fmt.Errorf("sealing %q: %w", r.Name, err)
	}
	sr := &protocol.SealedRecord{Sequence: r.Sequence, Origin: origin[:], Counter: uint64(r.Sequence), FileKey: fk[:], Sealed: body, Deleted: r.Deleted}
	if !r.Deleted && r.Type == index.File {
		sr.Chunks = make([][]byte, len(r.Blocks))
		for j, b := range r.Blocks {
			id := keys.ChunkID(b.Hash)
			sr.Chunks[j] = id[:]
		}
	}
	return sr, nil
}

// Size classes of sealed records: the inner record (crypt pads it with
// Padmé, which alone leaves lengths to about 8 bytes for small records)
// is brought to minRecordClass bytes, or the next power of two up to
// maxRecordClass, by SealedPayload.padding. Records of files of one chunk,
// directories, symlinks and deletions with names up to a few hundred
// bytes then all seal to one length. Above maxRecordClass (records of
// files of ~70 chunks or more) Padmé's ~12% classes are left as they are.
const (
	minRecordClass = 512
	maxRecordClass = 4096
)

// paddingFor returns how many padding bytes make a payload of n bytes
// (without padding) fill its inner record's size class.
func paddingFor(n int) int {
	inner := func(p int) int { return 1 + uvarintLen(p) + p }
	class := minRecordClass
	for class < inner(n) {
		class *= 2
	}
	for ; class <= maxRecordClass; class *= 2 {
		// The padding field costs its tag and length too.
		for k := max(0, class-inner(n)-4); k <= class-inner(n); k++ {
			size := n
			if k > 0 {
				size += 1 + uvarintLen(k) + k
			}
			if inner(size) == class {
				return k
			}
		}
	}
	return 0
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// Opened is a sealed record opened and checked.
type Opened struct {
	Record index.Record
	// Polynomial is the chunking polynomial the record's folder used when
	// it was sealed (0 from a sealer that did not say), so that a device
	// recovering the folder chunks as its devices did.
	Polynomial uint64
	// Checkpoint is the checkpoint the record carries, or nil.
	Checkpoint *Checkpoint
}

// Open opens and checks one sealed record of folderID: it must open under
// its header, hold a valid file record filed under its own name's key with
// the header's counter as sequence, and list exactly the chunk IDs of its
// blocks. The record's Sequence is the origin's counter.
func Open(keys *crypt.Keys, folderID string, sr *protocol.SealedRecord) (index.Record, error) {
	o, err := OpenAll(keys, folderID, sr)
	return o.Record, err
}

// OpenWithPolynomial is Open that also returns the record's polynomial
// (see Opened).
func OpenWithPolynomial(keys *crypt.Keys, folderID string, sr *protocol.SealedRecord) (index.Record, uint64, error) {
	o, err := OpenAll(keys, folderID, sr)
	return o.Record, o.Polynomial, err
}

// OpenAll is Open that returns everything the record holds.
func OpenAll(keys *crypt.Keys, folderID string, sr *protocol.SealedRecord) (Opened, error) {
	if len(sr.GetFileKey()) != len(crypt.FileKey{}) || len(sr.GetOrigin()) != len(crypt.DeviceID{}) {
		return Opened{}, ErrHeader
	}
	h := crypt.RecordHeader{Folder: folderID, File: crypt.FileKey(sr.GetFileKey()), Origin: crypt.DeviceID(sr.GetOrigin()), Counter: sr.GetCounter()}
	payload, err := keys.OpenRecord(h, sr.GetSealed())
	if err != nil {
		return Opened{}, err
	}
	var p protocol.SealedPayload
	if err := proto.Unmarshal(payload, &p); err != nil {
		return Opened{}, fmt.Errorf("%w: %w", ErrPayload, err)
	}
	r, err := index.FromWire(p.GetFile())
	if err != nil {
		return Opened{}, fmt.Errorf("%w: %w", ErrRecord, err)
	}
	if keys.FileKey(r.Name) != h.File {
		return Opened{}, ErrFileKey
	}
	if r.Deleted != sr.GetDeleted() {
		return Opened{}, ErrDeleted
	}
	if uint64(r.Sequence) != h.Counter {
		return Opened{}, ErrCounter
	}
	if len(sr.GetChunks()) != len(r.Blocks) {
		return Opened{}, ErrChunkList
	}
	for i, b := range r.Blocks {
		if id := keys.ChunkID(b.Hash); string(id[:]) != string(sr.GetChunks()[i]) {
			return Opened{}, ErrChunkList
		}
	}
	cp, err := checkpointFromWire(p.GetCheckpoint(), h.Counter, crypt.RecordGeneration(sr.GetSealed()))
	if err != nil {
		return Opened{}, err
	}
	return Opened{Record: r, Polynomial: p.GetPolynomial(), Checkpoint: cp}, nil
}
