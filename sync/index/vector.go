// Package index holds the sync engine's view of a folder: file records,
// version vectors, and which records win and which are needed.
//
// Invariants:
//   - A Vector is sorted by device short ID with no zero counters; every
//     function returns vectors in that form, so equal vectors encode to equal
//     bytes.
//   - Winner is a total order on records: every device computes the same
//     global version of a file from the same records.
package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"lockstep/crypt"
)

// Counter is one device's counter in a version vector.
type Counter struct {
	ID    crypt.ShortID
	Value uint64
}

// Vector is a version vector: how many changes each device has made to a
// file, as far as the holder knows.
type Vector []Counter

// Ordering is the result of comparing two vectors.
type Ordering int

// Orderings.
const (
	Equal Ordering = iota
	Greater
	Lesser
	Concurrent
)

func (o Ordering) String() string {
	return [...]string{"equal", "greater", "lesser", "concurrent"}[o]
}

// Update returns v with id's counter advanced. The new counter is at least
// now (seconds since the epoch, as Syncthing does), so counters of different
// devices roughly follow time and a device that lost its database does not
// reuse old counters.
func (v Vector) Update(id crypt.ShortID, now uint64) Vector {
	out := make(Vector, 0, len(v)+1)
	done := false
	for _, c := range v {
		switch {
		case !done && c.ID == id:
			next := c.Value + 1
			if next == 0 { // never wrap: a counter at the top stays there
				next = c.Value
			}
			out = append(out, Counter{id, max(next, now)})
			done = true
		case !done && c.ID > id:
			out = append(out, Counter{id, max(1, now)}, c)
			done = true
		default:
			out = append(out, c)
		}
	}
	if !done {
		out = append(out, Counter{id, max(1, now)})
	}
	return out
}

// Counter returns id's counter, 0 if absent.
func (v Vector) Counter(id crypt.ShortID) uint64 {
	i := sort.Search(len(v), func(i int) bool { return v[i].ID >= id })
	if i < len(v) && v[i].ID == id {
		return v[i].Value
	}
	return 0
}

// Merge returns the element-wise maximum of v and o.
func (v Vector) Merge(o Vector) Vector {
	out := make(Vector, 0, max(len(v), len(o)))
	i, j := 0, 0
	for i < len(v) || j < len(o) {
		switch {
		case j >= len(o) || i < len(v) && v[i].ID < o[j].ID:
			out = append(out, v[i])
			i++
		case i >= len(v) || o[j].ID < v[i].ID:
			out = append(out, o[j])
			j++
		default:
			out = append(out, Counter{v[i].ID, max(v[i].Value, o[j].Value)})
			i++
			j++
		}
	}
	return out
}

// Compare orders v against o.
func (v Vector) Compare(o Vector) Ordering {
	greater, lesser := false, false
	i, j := 0, 0
	for i < len(v) || j < len(o) {
		var a, b uint64
		switch {
		case j >= len(o) || i < len(v) && v[i].ID < o[j].ID:
			a = v[i].Value
			i++
		case i >= len(v) || o[j].ID < v[i].ID:
			b = o[j].Value
			j++
		default:
			a, b = v[i].Value, o[j].Value
			i++
			j++
		}
		if a > b {
			greater = true
		} else if a < b {
			lesser = true
		}
	}
	switch {
	case greater && lesser:
		return Concurrent
	case greater:
		return Greater
	case lesser:
		return Lesser
	}
	return Equal
}

// GreaterEqual reports whether v dominates or equals o.
func (v Vector) GreaterEqual(o Vector) bool {
	c := v.Compare(o)
	return c == Greater || c == Equal
}

func (v Vector) String() string {
	var b strings.Builder
	for i, c := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", c.ID, c.Value)
	}
	return b.String()
}

// ErrVector means an encoded vector is malformed.
var ErrVector = errors.New("malformed version vector")

// MarshalBinary encodes v as a count followed by (id, value) pairs, all
// uvarints except the 8-byte big-endian IDs.
func (v Vector) MarshalBinary() ([]byte, error) {
	b := binary.AppendUvarint(nil, uint64(len(v)))
	for _, c := range v {
		b = binary.BigEndian.AppendUint64(b, uint64(c.ID))
		b = binary.AppendUvarint(b, c.Value)
	}
	return b, nil
}

// UnmarshalVector decodes MarshalBinary's output, refusing anything not in
// canonical form (unsorted, duplicate or zero counters).
func UnmarshalVector(b []byte) (Vector, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, ErrVector
	}
	b = b[k:]
	v := make(Vector, 0, n)
	for range n {
		if len(b) < 8 {
			return nil, ErrVector
		}
		id := crypt.ShortID(binary.BigEndian.Uint64(b))
		val, k := binary.Uvarint(b[8:])
		if k <= 0 || val == 0 || len(v) > 0 && v[len(v)-1].ID >= id {
			return nil, ErrVector
		}
		v = append(v, Counter{id, val})
		b = b[8+k:]
	}
	if len(b) != 0 {
		return nil, ErrVector
	}
	return v, nil
}

// Canonical returns v sorted, without zero counters and with duplicates
// merged: the form every function here expects. Use it on vectors from
// peers.
func Canonical(v Vector) Vector {
	out := make(Vector, 0, len(v))
	for _, c := range v {
		if c.Value != 0 {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	w := 0
	for _, c := range out {
		if w > 0 && out[w-1].ID == c.ID {
			out[w-1].Value = max(out[w-1].Value, c.Value)
			continue
		}
		out[w] = c
		w++
	}
	return out[:w]
}
