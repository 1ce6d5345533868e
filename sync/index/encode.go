package index

import (
	"encoding/binary"
	"errors"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/storage/db"
)

// ErrBlocks means an encoded block list is malformed.
var ErrBlocks = errors.New("malformed block list")

// Record flags kept locally.
const (
	// FlagLocalOnly marks a local change in a receive-only folder: it is
	// kept in the local index but never announced.
	FlagLocalOnly uint32 = 1 << iota
)

// encodeBlocks stores sizes and hashes; offsets follow from the sizes.
func encodeBlocks(bs []Block) []byte {
	out := binary.AppendUvarint(make([]byte, 0, 4+len(bs)*(chunk.HashSize+3)), uint64(len(bs)))
	for _, b := range bs {
		out = binary.AppendUvarint(out, uint64(b.Size))
		out = append(out, b.Hash[:]...)
	}
	return out
}

func decodeBlocks(in []byte) ([]Block, error) {
	if len(in) == 0 {
		return nil, nil
	}
	n, k := binary.Uvarint(in)
	if k <= 0 || n > uint64(len(in)) {
		return nil, ErrBlocks
	}
	in = in[k:]
	out := make([]Block, 0, n)
	var off int64
	for range n {
		size, k := binary.Uvarint(in)
		if k <= 0 || size > 1<<32-1 || len(in) < k+chunk.HashSize {
			return nil, ErrBlocks
		}
		var b Block
		b.Offset, b.Size = off, uint32(size)
		copy(b.Hash[:], in[k:k+chunk.HashSize])
		out = append(out, b)
		off += int64(size)
		in = in[k+chunk.HashSize:]
	}
	if len(in) != 0 {
		return nil, ErrBlocks
	}
	return out, nil
}

var dbTypes = [...]db.FileType{File: db.TypeFile, Dir: db.TypeDir, Symlink: db.TypeSymlink}

// toDB converts a record for storage.
func toDB(r *Record) db.FileRecord {
	v, _ := r.Version.MarshalBinary()
	return db.FileRecord{
		Name: r.Name, Type: dbTypes[r.Type], Size: r.Size, Mode: r.Mode,
		ModTime: time.Unix(0, r.ModTime), Deleted: r.Deleted,
		Version: v, Chunks: encodeBlocks(r.Blocks), Sequence: r.Sequence,
		Target: r.Target, ModifiedBy: uint64(r.ModifiedBy), Inode: r.Inode, Flags: r.Flags,
	}
}

// fromDB converts a stored record back.
func fromDB(f db.FileRecord) (Record, error) {
	v, err := UnmarshalVector(f.Version)
	if err != nil {
		return Record{}, err
	}
	bs, err := decodeBlocks(f.Chunks)
	if err != nil {
		return Record{}, err
	}
	r := Record{
		Name: f.Name, Size: f.Size, Mode: f.Mode, ModTime: f.ModTime.UnixNano(),
		Deleted: f.Deleted, Version: v, Blocks: bs, Sequence: f.Sequence,
		Target: f.Target, ModifiedBy: crypt.ShortID(f.ModifiedBy), Inode: f.Inode, Flags: f.Flags,
	}
	switch f.Type {
	case db.TypeDir:
		r.Type = Dir
	case db.TypeSymlink:
		r.Type = Symlink
	}
	return r, nil
}
