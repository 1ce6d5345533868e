package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/restic/chunker"

	"lockstep/chunk"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
)

// errChanged: the file's size or mtime moved while it was read.
var errChanged = errors.New("changed while read")

// hasher reads and hashes files from the walker, one at a time, with its
// own Splitter, created on first use.
type hasher struct {
	ctx context.Context
	fs  FS
	pol chunker.Pol
	sp  *chunk.Splitter
	out outbox
}

func (h *hasher) run(jobs <-chan hashJob) error {
	for j := range jobs {
		if err := h.file(j); err != nil {
			return err
		}
	}
	return h.ctx.Err()
}

// file hashes one file, trying twice if it changes while read. A file that
// vanished is a deletion if it was known; any other failure is a skip.
func (h *hasher) file(j hashJob) error {
	var err error
	for range 2 {
		var rec index.Record
		rec, err = h.read(j.name)
		switch {
		case err == nil:
			return h.out.record(rec)
		case h.ctx.Err() != nil:
			return h.ctx.Err()
		case errors.Is(err, fs.ErrNotExist):
			if j.known == nil {
				return nil
			}
			return h.out.record(deletion(j.known))
		case errors.Is(err, errChanged), errors.Is(err, fsys.ErrReplaced):
			continue
		}
		return h.out.skip(j.name, err)
	}
	return h.out.skip(j.name, fmt.Errorf("%w: %s: %v", ErrChanging, j.name, err))
}

// read opens, chunks and hashes name, and describes it as it was while
// read: size and mtime before and after reading must agree, and the bytes
// read must be the size.
func (h *hasher) read(name string) (index.Record, error) {
	if h.sp == nil {
		sp, err := chunk.NewSplitter(h.pol)
		if err != nil {
			return index.Record{}, err
		}
		h.sp = sp
	}
	f, err := h.fs.Open(name)
	if err != nil {
		return index.Record{}, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return index.Record{}, err
	}
	var blocks []index.Block
	var n int64
	err = h.sp.Split(f, func(c chunk.Chunk, _ []byte) error {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		blocks = append(blocks, index.Block{Offset: c.Offset, Size: c.Size, Hash: c.Hash})
		n += int64(c.Size)
		return nil
	})
	if err != nil {
		return index.Record{}, err
	}
	after, err := f.Stat()
	if err != nil {
		return index.Record{}, err
	}
	if n != before.Size() || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		return index.Record{}, fmt.Errorf("%w: %d bytes read, size %d then %d", errChanged, n, before.Size(), after.Size())
	}
	return index.Record{
		Name:    name,
		Type:    index.File,
		Size:    before.Size(),
		Mode:    uint32(before.Mode().Perm()),
		ModTime: before.ModTime().UnixNano(),
		Blocks:  blocks,
		Inode:   inodeOf(before),
	}, nil
}
