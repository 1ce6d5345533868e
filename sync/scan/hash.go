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

// hasher reads and hashes files from the walker, one at a time, with
// Splitters from the scan's pool.
type hasher struct {
	ctx    context.Context
	fs     FS
	sps    *splitters
	out    outbox
	hashed func(n int64) // Options.Hashed, or nil
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
	f, err := h.fs.Open(name)
	if err != nil {
		return index.Record{}, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return index.Record{}, err
	}
	// A large file is cut by as many goroutines as there are idle
	// Splitters: the file a user just saved is often the only one to scan.
	sps, err := h.sps.get(chunk.Parts(before.Size(), h.sps.max))
	if err != nil {
		return index.Record{}, err
	}
	defer h.sps.put(sps)
	var blocks []index.Block
	var n int64
	err = chunk.SplitParallel(h.ctx, f, before.Size(), sps, func(c chunk.Chunk) error {
		blocks = append(blocks, index.Block{Offset: c.Offset, Size: c.Size, Hash: c.Hash})
		n += int64(c.Size)
		return nil
	})
	if h.hashed != nil {
		h.hashed(n)
	}
	if err != nil {
		return index.Record{}, err
	}
	// The size bytes were read; a file with more than its stated size
	// (some FUSE and pseudo files) is not described by them.
	var probe [1]byte
	if k, _ := f.ReadAt(probe[:], before.Size()); k > 0 {
		return index.Record{}, fmt.Errorf("%w: more than its size of %d bytes", errChanged, before.Size())
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

// splitters are a scan's Splitters, at most max of them, made when first
// needed (each holds about 4.5 MiB) and shared by its hashers.
type splitters struct {
	pol  chunker.Pol
	max  int
	free chan *chunk.Splitter
	made chan struct{} // a token per Splitter made
}

func newSplitters(pol chunker.Pol, max int) *splitters {
	return &splitters{pol: pol, max: max, free: make(chan *chunk.Splitter, max), made: make(chan struct{}, max)}
}

// get returns one Splitter, waiting for it if all are in use, and up to
// want-1 more that are idle or can still be made.
func (s *splitters) get(want int) ([]*chunk.Splitter, error) {
	var got []*chunk.Splitter
	for len(got) < want {
		select {
		case sp := <-s.free:
			got = append(got, sp)
			continue
		default:
		}
		select {
		case s.made <- struct{}{}:
			sp, err := chunk.NewSplitter(s.pol)
			if err != nil {
				<-s.made
				s.put(got)
				return nil, err
			}
			got = append(got, sp)
			continue
		default:
		}
		if len(got) > 0 {
			break
		}
		got = append(got, <-s.free)
	}
	return got, nil
}

func (s *splitters) put(sps []*chunk.Splitter) {
	for _, sp := range sps {
		s.free <- sp
	}
}
