package receiver

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

// Pages of the log and of the chunk list, read by a trusted device's
// check (sync/check). Each answer is built to fit the size the request
// allows, so a page never fails for being too long; a single record too
// long for it is ErrInvalidFile.

// pageRows is how many rows one database read of a page takes.
const pageRows = 512

// pageMargin is what a page keeps free of its size limit for the fields
// around its list and for each entry's tag and length.
const (
	pageMargin  = 64
	entryMargin = 8
)

// serveLogPage answers REQUEST_KIND_LOG_READ: records from log sequence
// req.Offset on.
func (r *Receiver) serveLogPage(ctx context.Context, f *folder, req *protocol.Request) ([]byte, error) {
	last, err := r.db.ReceiverLastSequence(ctx, f.id)
	if err != nil {
		return nil, err
	}
	page := &protocol.LogPage{LogId: f.logID, LastSequence: last}
	limit := int(req.GetSize()) - pageMargin
	size := 0
	after := max(req.GetOffset()-1, 0)
	for {
		recs, err := r.db.SealedRecordsAfter(ctx, f.id, after, pageRows)
		if err != nil {
			return nil, err
		}
		for _, w := range toWire(recs) {
			n := proto.Size(w) + entryMargin
			if size+n > limit {
				if len(page.Records) == 0 {
					return nil, fmt.Errorf("%w: log record %d does not fit in %d bytes", protocol.ErrInvalidFile, w.GetSequence(), req.GetSize())
				}
				page.More = true
				return proto.Marshal(page)
			}
			size += n
			page.Records = append(page.Records, w)
			after = w.GetSequence()
		}
		if len(recs) < pageRows {
			return proto.Marshal(page)
		}
	}
}

// serveChunkList answers REQUEST_KIND_CHUNK_LIST: chunks with an ID above
// req.ChunkId.
func (r *Receiver) serveChunkList(ctx context.Context, f *folder, req *protocol.Request) ([]byte, error) {
	list := &protocol.ChunkList{}
	limit := int(req.GetSize()) - pageMargin
	size := 0
	after := req.GetChunkId()
	for {
		chunks, err := r.db.SealedChunksAfter(ctx, f.id, after, pageRows)
		if err != nil {
			return nil, err
		}
		for _, c := range chunks {
			e := &protocol.ChunkEntry{Id: c.ID, Size: c.Size}
			n := proto.Size(e) + entryMargin
			if size+n > limit {
				if len(list.Chunks) == 0 {
					return nil, fmt.Errorf("%w: a chunk list of %d bytes holds nothing", protocol.ErrInvalidFile, req.GetSize())
				}
				list.More = true
				return proto.Marshal(list)
			}
			size += n
			list.Chunks = append(list.Chunks, e)
			after = c.ID
		}
		if len(chunks) < pageRows {
			return proto.Marshal(list)
		}
	}
}

// repairChunk replaces f's copy of chunk id with body, for a trusted
// device's check that found it missing or damaged: written as a blob of
// its own (durably), then the chunk's row points there. The receiver
// can't tell a good body from a bad one, so it takes one only where it
// sees the loss itself: for a chunk it holds, of the size it recorded,
// whose copy is gone, short or unreadable. A copy that reads whole is
// never replaced: else a device gone bad could overwrite the history the
// receiver keeps with bodies of the right size. It holds the folder's
// append lock, so no prune or repack moves the chunk meanwhile.
func (r *Receiver) repairChunk(ctx context.Context, f *folder, id, body []byte) error {
	if len(body) == 0 || len(body) > crypt.MaxSealedChunkSize {
		return fmt.Errorf("%w: a repair body of %d bytes", protocol.ErrInvalidFile, len(body))
	}
	f.append.Lock()
	defer f.append.Unlock()
	row, err := r.db.SealedChunk(ctx, f.id, id)
	if errors.Is(err, db.ErrNotFound) {
		return fmt.Errorf("%w: chunk %x is not held", protocol.ErrNoSuchFile, id)
	}
	if err != nil {
		return err
	}
	if int64(len(body)) != row.Size {
		return fmt.Errorf("%w: chunk %x is %d bytes, the repair %d", protocol.ErrInvalidFile, id, row.Size, len(body))
	}
	// From the store itself, not the pack cache: what is there now.
	var n int64
	count := func(rd io.Reader) error {
		var err error
		n, err = io.Copy(io.Discard, rd)
		return err
	}
	if row.Pack == nil {
		err = r.store.Get(ctx, chunkKey(f.fk, id), func(rd io.Reader) error { return count(io.LimitReader(rd, row.Size+1)) })
	} else {
		err = blob.GetRange(ctx, r.store, packKey(f.fk, row.Pack), row.Offset, row.Size, count)
	}
	if err == nil && n == row.Size {
		return fmt.Errorf("%w: this receiver's copy of chunk %x reads whole; it replaces only a copy it lacks or cannot read", protocol.ErrInvalidFile, id)
	}
	if err := r.store.Put(ctx, chunkKey(f.fk, id), bytes.NewReader(body), int64(len(body))); err != nil {
		return err
	}
	if row.Pack != nil {
		// The pack keeps its bytes until a repack finds them unused.
		if err := r.db.MoveSealedChunks(ctx, f.id, []db.SealedChunk{{ID: id, Size: row.Size}}); err != nil {
			return err
		}
	}
	r.log.Info("repaired a chunk", "folder", f.id, "chunk", hex.EncodeToString(id), "bytes", len(body))
	return nil
}
