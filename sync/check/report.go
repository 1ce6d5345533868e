// Package check verifies what a receiver holds without restoring it: on a
// trusted device with the folder key (every record opened, the log's chain
// and counters checked, every chunk a kept version needs present, and with
// read-data the chunks fetched and verified), and on a receiver without any
// key (its store against its database). Both end in a Report.
package check

import (
	"fmt"
	"slices"
	"time"
)

// Kind names what kind of problem a check found. The values are stable:
// scripts and the console read them.
type Kind string

const (
	// Missing: an object or chunk a kept version needs is not there.
	Missing Kind = "missing"
	// Damaged: an object or chunk is there but does not open, hash or
	// size as it must.
	Damaged Kind = "damaged"
	// RolledBack: the receiver holds an older state than it once
	// acknowledged, or its checkpoints prove records withheld.
	RolledBack Kind = "rolled-back"
	// Forked: the receiver holds records this device never sealed under
	// its own name, or two different records for one counter.
	Forked Kind = "forked"
	// Orphan: an object no record needs (only past the grace period).
	Orphan Kind = "orphan"
	// Leftover: a temporary file a crashed write left behind.
	Leftover Kind = "leftover"
	// Unreadable: the check could not read something it needed (the store
	// failed, the receiver refused): not proof of loss, but not clean.
	Unreadable Kind = "unreadable"
)

// Problem is one thing a check found wrong.
type Problem struct {
	Kind Kind `json:"kind"`
	// Object is what is wrong: a chunk ID (hex), a store key, a log
	// sequence ("log 123").
	Object string `json:"object,omitempty"`
	// Path and Version are the file version it affects, when known
	// (Version as the versions list shows it: "<origin hex>-<counter>").
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	// Detail says what was seen, in words.
	Detail string `json:"detail"`
}

// Report is the result of one check.
type Report struct {
	Folder string `json:"folder"`
	// Receiver is the device ID of the receiver checked; empty for a
	// receiver's check of its own store.
	Receiver string `json:"receiver,omitempty"`
	// Mode is "metadata", "read-data" or "read-data-subset" on a trusted
	// device, "store" on a receiver.
	Mode     string        `json:"mode"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	Records  int           `json:"records"`
	Versions int           `json:"versions"`
	Chunks   int           `json:"chunks"`
	// Objects counts the store objects looked at (receiver check).
	Objects   int   `json:"objects,omitempty"`
	BytesRead int64 `json:"bytesRead"`
	// Repaired lists what a repair sent again, Unrepaired what it could
	// not, and why.
	Repaired   []string  `json:"repaired,omitempty"`
	Unrepaired []string  `json:"unrepaired,omitempty"`
	Problems   []Problem `json:"problems"`
	// Truncated counts problems left out of Problems past MaxProblems.
	Truncated int `json:"truncated,omitempty"`
}

// MaxProblems bounds the problems a report lists; the rest are counted in
// Truncated, so a store that lost everything gives a report of bounded
// size.
const MaxProblems = 1000

// Add records a problem, counting it in Truncated past MaxProblems.
func (r *Report) Add(p Problem) {
	if len(r.Problems) >= MaxProblems {
		r.Truncated++
		return
	}
	r.Problems = append(r.Problems, p)
}

// Clean reports whether the check found nothing wrong.
func (r *Report) Clean() bool { return len(r.Problems) == 0 && r.Truncated == 0 }

// Counts returns how many problems of each kind the report lists.
func (r *Report) Counts() map[Kind]int {
	m := map[Kind]int{}
	for _, p := range r.Problems {
		m[p.Kind]++
	}
	return m
}

// Summary is one line for a terminal or the console: "clean" or the
// problem counts by kind.
func (r *Report) Summary() string {
	if r.Clean() {
		return "clean"
	}
	c := r.Counts()
	kinds := make([]Kind, 0, len(c))
	for k := range c {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	s := ""
	for i, k := range kinds {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d %s", c[k], k)
	}
	if r.Truncated > 0 {
		s += fmt.Sprintf(" (and %d more)", r.Truncated)
	}
	return s
}
