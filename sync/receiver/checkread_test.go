package receiver

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

// TestLogAndChunkPages: a check reads the whole log and chunk list in
// pages of the size it asks for, each record and chunk once, in order.
func TestLogAndChunkPages(t *testing.T) {
	ctx := context.Background()
	// One message at a time: a receiver drops a peer that floods it with
	// messages it has not acknowledged.
	n, src := filled(t, 1)
	for i := 2; i <= 20; i++ {
		src.send(t, record(src, uint64(i), byte(i), src.addChunk(10+i)))
		testutil.Eventually(t, waitTimeout, "record stored", func() bool { return src.lastAck() == int64(i) })
	}
	want := n.records(t)
	var got []*protocol.SealedRecord
	offset := int64(0)
	pages := 0
	for {
		data, err := n.r.Request(ctx, src.id, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_LOG_READ, Folder: folderID, Offset: offset, Size: 600})
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 600 {
			t.Fatalf("log page of %d bytes, asked for at most 600", len(data))
		}
		var page protocol.LogPage
		if err := protocol.DecodeAnswer(data, &page); err != nil {
			t.Fatal(err)
		}
		pages++
		if page.GetLogId() != n.logID(t) || page.GetLastSequence() != 20 {
			t.Fatalf("page says log %d up to %d, want %d up to 20", page.GetLogId(), page.GetLastSequence(), n.logID(t))
		}
		got = append(got, page.GetRecords()...)
		if !page.GetMore() {
			break
		}
		offset = page.GetRecords()[len(page.GetRecords())-1].GetSequence() + 1
	}
	if pages < 3 {
		t.Fatalf("20 records came in %d pages of 600 bytes: pages not bounded", pages)
	}
	if len(got) != len(want) {
		t.Fatalf("pages gave %d records, the log holds %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].GetSequence() != w.Seq || !bytes.Equal(got[i].GetSealed(), w.Sealed) {
			t.Fatalf("record %d: sequence %d, want %d", i, got[i].GetSequence(), w.Seq)
		}
	}
	if _, err := n.r.Request(ctx, src.id, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_LOG_READ, Folder: folderID, Size: 20}); !errors.Is(err, protocol.ErrInvalidFile) {
		t.Fatalf("a page too small for one record: %v, want ErrInvalidFile", err)
	}

	// 21 chunks: one shared by the first record, one per record.
	var ids [][]byte
	var after []byte
	for {
		data, err := n.r.Request(ctx, src.id, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_CHUNK_LIST, Folder: folderID, ChunkId: after, Size: 400})
		if err != nil {
			t.Fatal(err)
		}
		var list protocol.ChunkList
		if err := protocol.DecodeAnswer(data, &list); err != nil {
			t.Fatal(err)
		}
		for _, c := range list.GetChunks() {
			if after != nil && bytes.Compare(c.GetId(), after) <= 0 {
				t.Fatalf("chunk list out of order at %x", c.GetId())
			}
			if c.GetSize() <= 0 {
				t.Fatalf("chunk %x listed with size %d", c.GetId(), c.GetSize())
			}
			ids = append(ids, c.GetId())
			after = c.GetId()
		}
		if !list.GetMore() {
			break
		}
	}
	if len(ids) != 21 {
		t.Fatalf("chunk list gave %d chunks, want 21", len(ids))
	}
	other := newTrusted()
	if _, err := n.r.Request(ctx, other.id, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_CHUNK_LIST, Folder: folderID, Size: 400}); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("a device the folder is not shared with: %v, want ErrNoSuchFile", err)
	}
}

// TestRepairChunk: a repair replaces a chunk the receiver holds with a
// body of its size, as a blob of its own, and nothing else.
func TestRepairChunk(t *testing.T) {
	ctx := context.Background()
	n, src := filled(t, 2)
	recs := n.records(t)
	id := recs[0].Chunks[db.SealedIDSize:] // record 1's own chunk
	row, err := n.db.SealedChunk(ctx, folderID, id)
	if err != nil {
		t.Fatal(err)
	}
	if row.Pack == nil {
		t.Fatal("the test wants a packed chunk")
	}
	repair := func(id, body []byte) error {
		_, err := n.r.Request(ctx, src.id, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_CHUNK_REPAIR, Folder: folderID, ChunkId: id, Body: body})
		return err
	}
	if err := repair(id, make([]byte, row.Size+1)); !errors.Is(err, protocol.ErrInvalidFile) {
		t.Fatalf("a repair of another size: %v, want ErrInvalidFile", err)
	}
	if err := repair(bytes.Repeat([]byte{7}, 32), make([]byte, row.Size)); !errors.Is(err, protocol.ErrNoSuchFile) {
		t.Fatalf("a repair of a chunk not held: %v, want ErrNoSuchFile", err)
	}
	body := bytes.Repeat([]byte{0x5a}, int(row.Size))
	if err := repair(id, body); !errors.Is(err, protocol.ErrInvalidFile) {
		t.Fatalf("a repair of a copy that reads whole: %v, want ErrInvalidFile (no overwriting history)", err)
	}
	// The pack lost: now the receiver sees the loss and takes the repair.
	if err := n.store.Delete(ctx, packKey(folderKey(folderID), row.Pack)); err != nil {
		t.Fatal(err)
	}
	if err := repair(id, body); err != nil {
		t.Fatal(err)
	}
	now, err := n.db.SealedChunk(ctx, folderID, id)
	if err != nil || now.Pack != nil || now.Size != row.Size {
		t.Fatalf("after the repair the row is %+v, %v; want a blob of its own", now, err)
	}
	got, err := n.r.Request(ctx, src.id, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: folderID, ChunkId: id, Size: 1 << 20})
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("the repaired chunk reads back as %d bytes (%v), want the repair", len(got), err)
	}
}
