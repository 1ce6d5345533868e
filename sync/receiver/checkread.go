package receiver

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

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
