// Package pack is the format of a receiver's chunk packs: many small
// sealed chunk bodies in one store object, so that storing them costs one
// write instead of one per chunk.
//
// A pack is the bodies one after the other, then a trailer with one entry
// per body (its 32-byte chunk ID, its offset as a big-endian uint64 and its
// length as a big-endian uint32), then a footer of FooterSize bytes: the
// trailer's length as a big-endian uint32 and Magic. A pack describes
// itself, so a receiver rebuilds its chunk list from the store alone.
//
// Invariants Parse and ParseTrailer enforce (a pack that breaks one is
// ErrInvalid as a whole):
//
//   - At least one entry; entries are in body order, the first at offset
//     0, each starting where the one before ends, the last ending where
//     the trailer starts.
//   - Every length is from 1 to crypt.MaxSealedChunkSize; no chunk ID appears twice.
//
// A pack reveals no more than separate chunk objects do: their IDs (the
// objects' names) and sizes.
package pack

import (
	"encoding/binary"
	"errors"
	"fmt"

	"lockstep/crypt"
)

// Layout constants.
const (
	// Magic ends every pack.
	Magic = "lspack01"
	// FooterSize is the length of the footer.
	FooterSize = 4 + len(Magic)
	// IDSize is the length of a chunk ID.
	IDSize = 32
	// EntrySize is the length of one trailer entry.
	EntrySize = IDSize + 8 + 4
)

// ErrInvalid means bytes are not a well-formed pack, footer or trailer.
var ErrInvalid = errors.New("invalid chunk pack")

// Entry places one chunk body in a pack.
type Entry struct {
	ID     []byte // IDSize bytes
	Offset int64
	Length int64
}

// Builder assembles a pack in memory. The zero Builder is empty and ready.
type Builder struct {
	buf     []byte
	entries []Entry
	ids     map[string]bool
}

// NewBuilder returns an empty Builder that adds bodies into buf (from its
// start; its contents are overwritten) as long as they fit, and whose
// Finish returns buf's array if the pack fits it: for a caller that
// reuses the buffers of packs written.
func NewBuilder(buf []byte) *Builder { return &Builder{buf: buf[:0]} }

// Add appends a copy of body as the chunk id and returns its entry. It
// panics on an ID not of IDSize bytes, an empty or too long body, or an ID
// already added: callers add each checked chunk once.
func (b *Builder) Add(id, body []byte) Entry {
	if len(id) != IDSize || len(body) == 0 || len(body) > crypt.MaxSealedChunkSize || b.ids[string(id)] {
		panic(fmt.Sprintf("pack: bad chunk %x of %d bytes, or added twice", id, len(body)))
	}
	if b.ids == nil {
		b.ids = make(map[string]bool)
	}
	b.ids[string(id)] = true
	e := Entry{ID: append([]byte(nil), id...), Offset: int64(len(b.buf)), Length: int64(len(body))}
	b.buf = append(b.buf, body...)
	b.entries = append(b.entries, e)
	return e
}

// Len returns the bytes of the bodies added so far.
func (b *Builder) Len() int { return len(b.buf) }

// Count returns the number of chunks added so far.
func (b *Builder) Count() int { return len(b.entries) }

// Entries returns the entries added so far, in order; the caller must not
// change them.
func (b *Builder) Entries() []Entry { return b.entries }

// Finish appends the trailer and the footer and returns the whole pack.
// The Builder must not be used afterwards. A Builder with no chunk
// returns nil.
func (b *Builder) Finish() []byte {
	if len(b.entries) == 0 {
		return nil
	}
	out := b.buf
	for _, e := range b.entries {
		out = append(out, e.ID...)
		out = binary.BigEndian.AppendUint64(out, uint64(e.Offset))
		out = binary.BigEndian.AppendUint32(out, uint32(e.Length))
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(b.entries)*EntrySize))
	out = append(out, Magic...)
	b.buf, b.entries, b.ids = nil, nil, nil
	return out
}

// ParseFooter returns the trailer length a footer (the last FooterSize
// bytes of a pack of size bytes) names, checked against size.
func ParseFooter(footer []byte, size int64) (int64, error) {
	if len(footer) != FooterSize || string(footer[4:]) != Magic {
		return 0, fmt.Errorf("%w: no footer", ErrInvalid)
	}
	n := int64(binary.BigEndian.Uint32(footer))
	if n == 0 || n%EntrySize != 0 || n > size-int64(FooterSize)-n/EntrySize {
		// Each entry needs at least one body byte in front of the trailer.
		return 0, fmt.Errorf("%w: trailer of %d bytes in a pack of %d", ErrInvalid, n, size)
	}
	return n, nil
}

// ParseTrailer decodes a trailer whose bodies take the first bodies bytes
// of the pack, checking every invariant of the package comment.
func ParseTrailer(trailer []byte, bodies int64) ([]Entry, error) {
	if len(trailer) == 0 || len(trailer)%EntrySize != 0 {
		return nil, fmt.Errorf("%w: trailer of %d bytes", ErrInvalid, len(trailer))
	}
	entries := make([]Entry, 0, len(trailer)/EntrySize)
	seen := make(map[string]bool, cap(entries))
	var next int64
	for off := 0; off < len(trailer); off += EntrySize {
		e := trailer[off : off+EntrySize]
		id := e[:IDSize]
		pos := binary.BigEndian.Uint64(e[IDSize:])
		length := int64(binary.BigEndian.Uint32(e[IDSize+8:]))
		switch {
		case pos != uint64(next):
			return nil, fmt.Errorf("%w: entry %d at offset %d, want %d", ErrInvalid, off/EntrySize, pos, next)
		case length == 0 || length > int64(crypt.MaxSealedChunkSize):
			return nil, fmt.Errorf("%w: entry %d of %d bytes", ErrInvalid, off/EntrySize, length)
		case seen[string(id)]:
			return nil, fmt.Errorf("%w: chunk %x twice", ErrInvalid, id)
		}
		seen[string(id)] = true
		entries = append(entries, Entry{ID: append([]byte(nil), id...), Offset: next, Length: length})
		next += length
		if next > bodies {
			return nil, fmt.Errorf("%w: entry %d ends at %d, past the bodies' %d bytes", ErrInvalid, off/EntrySize, next, bodies)
		}
	}
	if next != bodies {
		return nil, fmt.Errorf("%w: entries end at %d, the trailer starts at %d", ErrInvalid, next, bodies)
	}
	return entries, nil
}

// Parse decodes the index of a whole pack.
func Parse(p []byte) ([]Entry, error) {
	if len(p) < FooterSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalid, len(p))
	}
	size := int64(len(p))
	n, err := ParseFooter(p[size-int64(FooterSize):], size)
	if err != nil {
		return nil, err
	}
	bodies := size - int64(FooterSize) - n
	return ParseTrailer(p[bodies:size-int64(FooterSize)], bodies)
}
