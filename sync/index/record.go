package index

import (
	"bytes"

	"lockstep/chunk"
	"lockstep/crypt"
)

// Type is the kind of a file record.
type Type uint8

// Types of records.
const (
	File Type = iota
	Dir
	Symlink
)

func (t Type) String() string {
	switch t {
	case File:
		return "file"
	case Dir:
		return "dir"
	case Symlink:
		return "symlink"
	}
	return "unknown"
}

// Block is one content-defined chunk of a file.
type Block struct {
	Offset int64
	Size   uint32
	Hash   chunk.Hash
}

// Record is what a device knows of one file: its metadata, content and
// version. Names are folder-relative, NFC, "/"-separated.
//
// The fields holding pointers come first and the small ones last: a node
// keeps two records a file, and so ordered a record takes 136 bytes (144
// allocated, not 160), and the collector scans only its first 80.
type Record struct {
	Name    string
	Version Vector
	Blocks  []Block
	Target  string // symlink target, stored as given, never followed
	Size    int64
	ModTime int64 // nanoseconds since the epoch
	// Sequence orders a device's records: every change it makes gets the
	// next number, so a peer asks for "everything after N".
	Sequence int64
	// ModifiedBy is the device that made this version.
	ModifiedBy crypt.ShortID
	Mode       uint32 // permission bits only
	Type       Type
	Deleted    bool

	// Local details; not sent to peers.
	Inode uint64 // for change detection
	Flags uint32 // FlagLocalOnly, ...
}

// SameContent reports whether r and o describe the same file state, ignoring
// version, sequence and local-only fields: two devices that made the same
// change independently need not pull from each other.
func (r *Record) SameContent(o *Record) bool {
	if r.Type != o.Type || r.Deleted != o.Deleted {
		return false
	}
	if r.Deleted {
		return true
	}
	switch r.Type {
	case Symlink:
		return r.Target == o.Target
	case Dir:
		return r.Mode == o.Mode
	}
	if r.Size != o.Size || r.Mode != o.Mode || r.ModTime != o.ModTime || len(r.Blocks) != len(o.Blocks) {
		return false
	}
	for i := range r.Blocks {
		if r.Blocks[i] != o.Blocks[i] {
			return false
		}
	}
	return true
}

// Wins reports whether r is the global version of a file over o. A
// dominating vector wins; of concurrent (conflicting) versions, an existing
// file beats a deletion, then the later modification time wins, then the
// change made by the larger device short ID. Every device computes the same
// answer from the same two records.
func (r *Record) Wins(o *Record) bool {
	switch r.Version.Compare(o.Version) {
	case Greater:
		return true
	case Lesser:
		return false
	case Equal:
		// Same version: identical by construction. Prefer the lexically
		// smaller encoding to stay total.
		return false
	}
	if r.Deleted != o.Deleted {
		return !r.Deleted
	}
	if r.ModTime != o.ModTime {
		return r.ModTime > o.ModTime
	}
	if r.ModifiedBy != o.ModifiedBy {
		return r.ModifiedBy > o.ModifiedBy
	}
	a, _ := r.Version.MarshalBinary()
	b, _ := o.Version.MarshalBinary()
	return bytes.Compare(a, b) > 0
}
