package index

import (
	"fmt"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/fsys"
	"lockstep/sync/protocol"
)

// ToWire converts a record for a peer.
func ToWire(r *Record) *protocol.FileInfo {
	fi := &protocol.FileInfo{
		Name:          r.Name,
		Size:          r.Size,
		Permissions:   r.Mode,
		ModifiedNs:    r.ModTime,
		Deleted:       r.Deleted,
		Sequence:      r.Sequence,
		SymlinkTarget: r.Target,
		ModifiedBy:    uint64(r.ModifiedBy),
		Version:       &protocol.Vector{Counters: make([]*protocol.Counter, len(r.Version))},
	}
	switch r.Type {
	case Dir:
		fi.Type = protocol.FileInfoType_FILE_INFO_TYPE_DIRECTORY
	case Symlink:
		fi.Type = protocol.FileInfoType_FILE_INFO_TYPE_SYMLINK
	}
	for i, c := range r.Version {
		fi.Version.Counters[i] = &protocol.Counter{Id: uint64(c.ID), Value: c.Value}
	}
	if len(r.Blocks) > 0 {
		fi.Blocks = make([]*protocol.BlockInfo, len(r.Blocks))
		for i, b := range r.Blocks {
			fi.Blocks[i] = &protocol.BlockInfo{Offset: b.Offset, Size: b.Size, Hash: b.Hash[:]}
		}
	}
	return fi
}

// PeerModeMask is what a peer may set of a file's mode: permission bits,
// but never setuid, setgid or sticky, nor writable by others. A peer's
// 0o7777 would otherwise make a world-writable setuid file here.
const PeerModeMask = 0o775

// maxCounterAhead bounds how far a version counter may be ahead of the
// clock. Counters are at least the time of the edit in seconds (Vector.
// Update), and only a burst of edits within one second takes one past
// the clock; a counter decades ahead is a hostile or broken peer's, and
// taking it would make every later edit here lose (or, at 2^64-1, wrap).
const maxCounterAhead = 1 << 30

// FromWire converts and checks a peer's record. A record that could make
// the engine misbehave — a hostile name, blocks that do not tile the file,
// a chunk larger than the chunker makes — is refused with the reason.
func FromWire(fi *protocol.FileInfo) (Record, error) {
	r := Record{
		Name:       fi.GetName(),
		Size:       fi.GetSize(),
		Mode:       fi.GetPermissions() & PeerModeMask,
		ModTime:    fi.GetModifiedNs(),
		Deleted:    fi.GetDeleted(),
		Sequence:   fi.GetSequence(),
		Target:     fi.GetSymlinkTarget(),
		ModifiedBy: crypt.ShortID(fi.GetModifiedBy()),
	}
	if err := fsys.ValidName(r.Name); err != nil {
		return r, err
	}
	switch fi.GetType() {
	case protocol.FileInfoType_FILE_INFO_TYPE_FILE:
		r.Type = File
	case protocol.FileInfoType_FILE_INFO_TYPE_DIRECTORY:
		r.Type = Dir
	case protocol.FileInfoType_FILE_INFO_TYPE_SYMLINK:
		r.Type = Symlink
	default:
		return r, fmt.Errorf("%q: unknown type %v", r.Name, fi.GetType())
	}
	if r.Size < 0 || r.Sequence < 0 {
		return r, fmt.Errorf("%q: negative size or sequence", r.Name)
	}
	v := make(Vector, 0, len(fi.GetVersion().GetCounters()))
	limit := uint64(time.Now().Unix()) + maxCounterAhead
	for _, c := range fi.GetVersion().GetCounters() {
		if c.GetValue() > limit {
			return r, fmt.Errorf("%q: version counter %d is far ahead of the clock", r.Name, c.GetValue())
		}
		v = append(v, Counter{ID: crypt.ShortID(c.GetId()), Value: c.GetValue()})
	}
	r.Version = Canonical(v)
	if len(r.Version) == 0 {
		return r, fmt.Errorf("%q: empty version", r.Name)
	}
	if r.Type == Symlink && !r.Deleted && (r.Target == "" || len(r.Target) > 4096) {
		return r, fmt.Errorf("%q: bad symlink target", r.Name)
	}
	if r.Type != File || r.Deleted {
		if len(fi.GetBlocks()) > 0 {
			return r, fmt.Errorf("%q: blocks on a record that has no content", r.Name)
		}
		if r.Type != File {
			r.Size = 0
		}
		return r, nil
	}
	var off int64
	r.Blocks = make([]Block, len(fi.GetBlocks()))
	for i, b := range fi.GetBlocks() {
		if b.GetOffset() != off || b.GetSize() == 0 || b.GetSize() > chunk.MaxSize || len(b.GetHash()) != chunk.HashSize {
			return r, fmt.Errorf("%q: block %d is malformed", r.Name, i)
		}
		r.Blocks[i] = Block{Offset: off, Size: b.GetSize()}
		copy(r.Blocks[i].Hash[:], b.GetHash())
		off += int64(b.GetSize())
	}
	if off != r.Size {
		return r, fmt.Errorf("%q: blocks cover %d bytes of %d", r.Name, off, r.Size)
	}
	return r, nil
}
