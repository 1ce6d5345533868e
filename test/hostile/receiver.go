package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"sync"

	"lockstep/crypt"
	"lockstep/sync/protocol"
)

// receiverClaimsHuge acts as an untrusted receiver of the folder, which
// the node shares with this device with a password: it stores the
// envelope the node puts (answering "none" to the first get), takes and
// acknowledges the node's sealed records without keeping them, and says
// in its cluster config that it holds the node's records up to cfg.claim
// while its own log is empty. A node that believed it would number its
// next records past the claim (2^63-101: a hundred more and sequences go
// negative).
func receiverClaimsHuge(ctx context.Context, cfg *config, id *crypt.Identity, out *output) error {
	s, err := connect(ctx, cfg, id, out)
	if err != nil {
		return err
	}
	defer s.linger(ctx)
	var (
		mu       sync.Mutex
		envelope []byte
		records  int
		top      uint64 // the highest counter seen
	)
	s.request = func(_ context.Context, req *protocol.Request) ([]byte, error) {
		out.emit("requested", map[string]any{"folder": req.GetFolder(), "kind": req.GetKind().String()})
		if req.GetFolder() != cfg.folder {
			return nil, protocol.ErrNoSuchFile
		}
		mu.Lock()
		defer mu.Unlock()
		switch req.GetKind() {
		case protocol.RequestKind_REQUEST_KIND_ENVELOPE_GET:
			if envelope == nil {
				return nil, protocol.ErrNoSuchFile
			}
			return bytes.Clone(envelope), nil
		case protocol.RequestKind_REQUEST_KIND_ENVELOPE_PUT:
			prev := sha256.Sum256(envelope)
			stored := envelope == nil && len(req.GetPrevious()) == 0 ||
				envelope != nil && bytes.Equal(req.GetPrevious(), prev[:])
			if stored {
				envelope = bytes.Clone(req.GetEnvelope())
			}
			out.emit("envelope-put", map[string]any{"stored": stored, "bytes": len(req.GetEnvelope())})
			return bytes.Clone(envelope), nil
		}
		return nil, protocol.ErrNoSuchFile // it keeps no chunks and no versions
	}
	s.sealed = func(idx *protocol.SealedIndex) error {
		recs := idx.GetRecords()
		if len(recs) == 0 {
			return nil
		}
		var high uint64
		for _, r := range recs {
			high = max(high, r.GetCounter())
		}
		mu.Lock()
		records += len(recs)
		top = max(top, high)
		total, most := records, top
		mu.Unlock()
		out.emit("sealed-index", map[string]any{
			"folder": idx.GetFolder(), "records": len(recs), "maxCounter": high,
			"firstSequence": recs[0].GetSequence(), "lastSequence": recs[len(recs)-1].GetSequence(),
			"total": total, "highest": most,
		})
		return s.conn.SealedAck(ctx, &protocol.SealedAck{Folder: idx.GetFolder(), Sequence: recs[len(recs)-1].GetSequence()})
	}
	return s.conn.ClusterConfig(ctx, &protocol.ClusterConfig{Folders: []*protocol.Folder{{
		Id: cfg.folder, Label: cfg.folder, Type: protocol.FolderType_FOLDER_TYPE_ENCRYPTED,
		Devices: []*protocol.FolderDevice{
			{DeviceId: id.ID[:], IndexId: indexID(id.ID), MaxSequence: 0, Encrypted: true},
			{DeviceId: cfg.node[:], MaxSequence: cfg.claim},
		},
	}}})
}
