package sealed

import (
	"slices"
	"time"

	"lockstep/crypt"
)

// What the checkpoints in a receiver's log prove (Checkpoint): a reader of
// the log notes every record it opened, then asks each origin's newest
// checkpoint whether those records are the ones it covers.

// Prover collects the verified records of a log for Proofs. It is used
// from one goroutine; it keeps a few words per record.
type Prover struct {
	keys    *crypt.Keys
	origins map[crypt.DeviceID]*originLog
}

// NewProver returns a Prover for records opened with keys.
func NewProver(keys *crypt.Keys) *Prover {
	return &Prover{keys: keys, origins: map[crypt.DeviceID]*originLog{}}
}

// Proof is what the newest checkpoint of one origin proves of the log a
// recovery or a check read.
type Proof struct {
	// Origin is the trusted device that sealed the checkpoint.
	Origin crypt.DeviceID
	// AsOf is when that device sealed it: the log holds (Complete) or
	// lacks the state of its index at that time.
	AsOf time.Time
	// Counter is the origin's highest counter the checkpoint covers.
	Counter uint64
	// Complete: the log holds, of every name, the newest record the
	// origin had up to Counter, and no older one in its place.
	Complete bool
	// Files is how many files (not deletions) the checkpoint covers, and
	// Found how many of them the log gave, counted the same way. A
	// receiver that dropped newest versions shows Found below Files, one
	// that put older versions in their place shows Complete false with
	// the counts equal.
	Files, Found uint64
	// After counts the origin's records above Counter: the log holds
	// them, but no checkpoint covers them (a pass that was cut short, or
	// a newer checkpoint withheld).
	After int
}

// mark is one verified record of an origin: enough to recount a
// checkpoint.
type mark struct {
	counter uint64
	deleted bool
}

// originLog is what a Prover keeps of one origin's records.
type originLog struct {
	marks  map[crypt.FileKey][]mark
	newest *Checkpoint // the one with the highest counter
}

// Note keeps a verified record of origin, and its checkpoint if any.
func (c *Prover) Note(origin crypt.DeviceID, fk crypt.FileKey, counter uint64, deleted bool, cp *Checkpoint) {
	o := c.origins[origin]
	if o == nil {
		o = &originLog{marks: map[crypt.FileKey][]mark{}}
		c.origins[origin] = o
	}
	o.marks[fk] = append(o.marks[fk], mark{counter, deleted})
	if cp != nil && (o.newest == nil || cp.Counter > o.newest.Counter ||
		cp.Counter == o.newest.Counter && cp.Time.After(o.newest.Time)) {
		o.newest = cp
	}
}

// Proofs checks each origin's newest checkpoint against its records, in
// origin order; origins without a checkpoint are left out.
func (c *Prover) Proofs() []Proof {
	var out []Proof
	for origin, o := range c.origins {
		cp := o.newest
		if cp == nil {
			continue
		}
		p := Proof{Origin: origin, AsOf: cp.Time, Counter: cp.Counter, Files: cp.Files}
		d, err := NewDigestAt(c.keys, cp.Gen)
		if err != nil {
			continue // opened, so the generation is known: cannot happen
		}
		for fk, ms := range o.marks {
			var best *mark
			for i := range ms {
				m := &ms[i]
				if m.counter > cp.Counter {
					p.After++
					continue
				}
				if best == nil || m.counter > best.counter {
					best = m
				}
			}
			if best != nil && !best.deleted {
				d.Add(fk, best.counter)
				p.Found++
			}
		}
		p.Complete = d.Matches(*cp)
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Proof) int { return slices.Compare(a.Origin[:], b.Origin[:]) })
	return out
}

// NewestProof returns the proof whose checkpoint was sealed last, or nil.
func NewestProof(ps []Proof) *Proof {
	var n *Proof
	for i := range ps {
		if n == nil || ps[i].AsOf.After(n.AsOf) {
			n = &ps[i]
		}
	}
	return n
}
