package sealed

import (
	"errors"
	"time"

	"lockstep/crypt"
	"lockstep/sync/protocol"
)

// ErrCheckpoint: a record opened, but the checkpoint it carries is
// malformed (a digest of the wrong size, a counter below the record's own,
// no time). Only a holder of the folder key can seal one, so this is a
// broken or hostile trusted device, not a receiver.
var ErrCheckpoint = errors.New("record's checkpoint is malformed")

// A Checkpoint is a trusted device's word, sealed inside one record of each
// upload pass, on the state of its index the pass brought a receiver to:
// of each name, the record with the highest counter up to Counter; Files
// of them not deletions; Digest the XOR of their crypt.Keys.CheckpointMark.
//
// A device that reads the receiver's log back computes the same from the
// records it got (Digest.Add for the newest record up to Counter of each
// file key, deletions left out) and compares: a record dropped, withheld
// or replaced by an older version shows as a difference. The receiver
// cannot make marks cancel (they are keyed) nor forge or alter a
// checkpoint (it is sealed). What it can still do is serve an older state
// whole, with its checkpoint: the checkpoint's Time says how old.
type Checkpoint struct {
	Counter uint64
	Files   uint64
	Digest  [32]byte
	Time    time.Time
	// Gen is the key generation of the marks: the generation that sealed
	// the record carrying the checkpoint (set by Open; not sealed).
	Gen byte
}

// Digest accumulates the marks of a checkpoint. The zero value is not
// usable; see NewDigest.
type Digest struct {
	keys  *crypt.Keys
	gen   byte
	files uint64
	sum   [32]byte
}

// NewDigest returns an empty digest under the generation of keys that
// seals.
func NewDigest(keys *crypt.Keys) *Digest { return &Digest{keys: keys, gen: keys.Generation()} }

// NewDigestAt returns an empty digest under generation gen of keys, to
// check a checkpoint of that generation; one keys lacks is
// crypt.ErrNewerKey.
func NewDigestAt(keys *crypt.Keys, gen byte) (*Digest, error) {
	if _, err := keys.CheckpointMark(gen, crypt.FileKey{}, 0); err != nil {
		return nil, err
	}
	return &Digest{keys: keys, gen: gen}, nil
}

// Add counts the record of file key fk with counter: the newest of its
// name up to the checkpoint, not a deletion.
func (d *Digest) Add(fk crypt.FileKey, counter uint64) {
	m, err := d.keys.CheckpointMark(d.gen, fk, counter)
	if err != nil {
		panic("sealed: a digest of a generation its keys lack") // checked when made
	}
	for i := range d.sum {
		d.sum[i] ^= m[i]
	}
	d.files++
}

// Checkpoint returns the checkpoint of what was added, at counter.
func (d *Digest) Checkpoint(counter uint64, at time.Time) Checkpoint {
	return Checkpoint{Counter: counter, Files: d.files, Digest: d.sum, Time: at, Gen: d.gen}
}

// Matches reports whether what was added is what cp covers.
func (d *Digest) Matches(cp Checkpoint) bool {
	return d.files == cp.Files && d.sum == cp.Digest
}

func (cp *Checkpoint) toWire() *protocol.Checkpoint {
	return &protocol.Checkpoint{Counter: cp.Counter, Files: cp.Files, Digest: cp.Digest[:], TimeNs: cp.Time.UnixNano()}
}

// checkpointFromWire checks a checkpoint carried by a record of counter
// sealed with key generation gen.
func checkpointFromWire(w *protocol.Checkpoint, counter uint64, gen byte) (*Checkpoint, error) {
	if w == nil {
		return nil, nil
	}
	if len(w.GetDigest()) != len(Checkpoint{}.Digest) || w.GetCounter() < counter || w.GetTimeNs() <= 0 {
		return nil, ErrCheckpoint
	}
	cp := &Checkpoint{Counter: w.GetCounter(), Files: w.GetFiles(), Time: time.Unix(0, w.GetTimeNs()), Gen: gen}
	copy(cp.Digest[:], w.GetDigest())
	return cp, nil
}
