package scan

import (
	"errors"
	"fmt"
	"iter"
	"strings"

	"lockstep/sync/index"
)

// errStop ends a Known iteration early; it never leaves this file.
var errStop = errors.New("stop iteration")

// knownStream pulls the known records of one scope, in name order, one at
// a time, so the walker can merge them with the directory listings.
type knownStream struct {
	next func() (index.Record, bool)
	stop func()
	err  error // set by the iteration when it ends with an error

	cur    index.Record
	filled bool // cur holds the next record
	done   bool // no records left
}

// openKnown returns the records of known under dir ("" for all of them).
// The caller must call close.
func openKnown(known Known, dir string) *knownStream {
	s := &knownStream{}
	each := known.EachLocal
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
		if u, ok := known.(KnownUnder); ok {
			each = func(fn func(index.Record) error) error { return u.EachLocalUnder(dir, fn) }
		}
	}
	seq := func(yield func(index.Record) bool) {
		prev, first := "", true
		err := each(func(r index.Record) error {
			if !first && r.Name <= prev {
				return fmt.Errorf("%w: %q after %q", ErrKnownOrder, r.Name, prev)
			}
			prev, first = r.Name, false
			switch {
			case r.Deleted:
				return nil
			case !strings.HasPrefix(r.Name, prefix):
				if r.Name > prefix {
					return errStop // past the subtree: nothing more for us
				}
				return nil
			}
			if !yield(r) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			s.err = fmt.Errorf("scan: reading known records: %w", err)
		}
	}
	s.next, s.stop = iter.Pull(seq)
	return s
}

// head returns the next record without taking it, nil when there are no
// more (then the error, if the iteration failed).
func (s *knownStream) head() (*index.Record, error) {
	if !s.filled && !s.done {
		s.cur, s.filled = s.next()
		s.done = !s.filled
	}
	if s.done {
		return nil, s.err
	}
	return &s.cur, nil
}

// pop takes the record head returned.
func (s *knownStream) pop() { s.filled = false }

// close ends the iteration.
func (s *knownStream) close() { s.stop() }
