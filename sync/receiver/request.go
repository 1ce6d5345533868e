package receiver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"google.golang.org/protobuf/proto"
	"strings"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

// Request serves REQUEST_KIND_SEALED_CHUNK, _ENVELOPE_GET and
// _ENVELOPE_PUT for folders held and shared with peer. An unknown or
// unshared folder, a chunk or envelope not held, is protocol.ErrNoSuchFile;
// any other kind, a malformed request, or data longer than req.Size is
// protocol.ErrInvalidFile. Other errors (the store failing) come back as
// they are.
func (r *Receiver) Request(ctx context.Context, peer crypt.DeviceID, req *protocol.Request) ([]byte, error) {
	f, err := r.lookup(req.GetFolder(), peer)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", protocol.ErrNoSuchFile, err)
	}
	switch req.GetKind() {
	case protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK:
		return r.serveChunk(ctx, f, req)
	case protocol.RequestKind_REQUEST_KIND_VERSIONS:
		recs, err := r.db.SealedRecordsOfFile(ctx, f.id, req.GetFileKey())
		if err != nil {
			return nil, err
		}
		data, err := proto.Marshal(&protocol.SealedIndex{Folder: f.id, Records: toWire(recs)})
		if err != nil {
			return nil, err
		}
		return fitting(data, req)
	case protocol.RequestKind_REQUEST_KIND_ENVELOPE_GET:
		env, _, err := r.db.ReceiverEnvelope(ctx, f.id)
		if errors.Is(err, db.ErrNotFound) {
			return nil, fmt.Errorf("%w: folder %q has no envelope", protocol.ErrNoSuchFile, f.id)
		}
		if err != nil {
			return nil, err
		}
		return fitting(env, req)
	case protocol.RequestKind_REQUEST_KIND_ENVELOPE_PUT:
		if len(req.GetEnvelope()) > int(req.GetSize()) {
			// The answer could not carry it back: store nothing.
			return nil, fmt.Errorf("%w: envelope of %d bytes, answer limited to %d", protocol.ErrInvalidFile, len(req.GetEnvelope()), req.GetSize())
		}
		env, err := r.putEnvelope(ctx, f, req.GetEnvelope(), req.GetPrevious())
		if err != nil {
			return nil, err
		}
		return fitting(env, req)
	case protocol.RequestKind_REQUEST_KIND_LOG_READ:
		return r.serveLogPage(ctx, f, req)
	case protocol.RequestKind_REQUEST_KIND_CHUNK_LIST:
		return r.serveChunkList(ctx, f, req)
	case protocol.RequestKind_REQUEST_KIND_CHUNK_REPAIR:
		return nil, r.repairChunk(ctx, f, req.GetChunkId(), req.GetBody())
	default:
		return nil, fmt.Errorf("%w: a receiver does not serve requests of kind %v", protocol.ErrInvalidFile, req.GetKind())
	}
}

// fitting returns data, or ErrInvalidFile when it is longer than the
// request allows.
func fitting(data []byte, req *protocol.Request) ([]byte, error) {
	if len(data) > int(req.GetSize()) {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d requested", protocol.ErrInvalidFile, len(data), req.GetSize())
	}
	return data, nil
}

// serveChunk returns the sealed chunk req.ChunkId of f.
func (r *Receiver) serveChunk(ctx context.Context, f *folder, req *protocol.Request) ([]byte, error) {
	id := req.GetChunkId()
	if len(id) != db.SealedIDSize {
		return nil, fmt.Errorf("%w: chunk ID of %d bytes", protocol.ErrInvalidFile, len(id))
	}
	data, err := r.chunkBody(ctx, f, id, int64(req.GetSize()))
	if errors.Is(err, blob.ErrNotExist) {
		return nil, fmt.Errorf("%w: chunk %x", protocol.ErrNoSuchFile, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading chunk %x: %w", id, err)
	}
	if _, err := fitting(data, req); err != nil {
		protocol.Recycle(data) // lent memory goes back to its pack
		return nil, err
	}
	return data, nil
}

// putEnvelope stores env as f's envelope if previous names the one held
// (SHA-256), or is empty and none is held, and returns the envelope held
// afterwards: env, or the one there when previous did not match
// (ErrNoSuchFile when there is none). The new generation is written to
// the store before the database.
func (r *Receiver) putEnvelope(ctx context.Context, f *folder, env, previous []byte) ([]byte, error) {
	if len(env) == 0 || len(env) > protocol.MaxEnvelopeSize {
		return nil, fmt.Errorf("%w: envelope of %d bytes", protocol.ErrInvalidFile, len(env))
	}
	f.append.Lock()
	defer f.append.Unlock()
	cur, gen, err := r.db.ReceiverEnvelope(ctx, f.id)
	switch {
	case errors.Is(err, db.ErrNotFound):
		if len(previous) != 0 {
			return nil, fmt.Errorf("%w: folder %q has no envelope to replace", protocol.ErrNoSuchFile, f.id)
		}
	case err != nil:
		return nil, err
	default:
		if sum := sha256.Sum256(cur); !bytes.Equal(previous, sum[:]) {
			return cur, nil
		}
	}
	gen++
	if err := r.store.Put(ctx, envelopeKey(f.fk, gen), bytes.NewReader(env), int64(len(env))); err != nil {
		return nil, fmt.Errorf("writing envelope: %w", err)
	}
	if err := r.db.PutReceiverEnvelope(ctx, f.id, env, gen); err != nil {
		return nil, err
	}
	r.log.Info("stored a new folder key envelope", "folder", f.id, "generation", gen)
	if gen > 1 { // generations start at 1: no LIST for the first
		r.dropEnvelopesBefore(ctx, f, gen)
	}
	return bytes.Clone(env), nil
}

// dropEnvelopesBefore deletes f's envelopes older than generation gen
// from the store: a superseded envelope opens with the old password, which
// a password change is meant to lock out. Failures are logged; a rebuild
// takes the highest generation anyway.
func (r *Receiver) dropEnvelopesBefore(ctx context.Context, f *folder, gen int64) {
	prefix := envelopeKey(f.fk, 0)
	prefix = prefix[:strings.LastIndexByte(prefix, '/')+1]
	var old []string
	err := r.store.List(ctx, prefix, func(info blob.Info) error {
		if info.Key < envelopeKey(f.fk, gen) {
			old = append(old, info.Key)
		}
		return nil
	})
	for _, key := range old {
		if derr := r.store.Delete(ctx, key); derr != nil && !errors.Is(derr, blob.ErrNotExist) {
			err = errors.Join(err, derr)
		}
	}
	if err != nil {
		r.log.Warn("deleting superseded folder key envelopes", "folder", f.id, "err", err)
	}
}
