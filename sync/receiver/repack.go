package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/receiver/pack"
)

// packPlan is what garbage collection does to a folder's packs.
type packPlan struct {
	drop   []string       // keys of packs no chunk row uses, stored before the cutoff
	repack []db.PackUsage // packs whose held chunks take less than half their size, as after the collection
}

// planPacks lists f's packs and decides, as it will be once the chunk
// rows of garbage are gone, which to delete and which to repack. A pack
// no row uses is deleted only when no ingest of this process is writing
// it or has yet to commit it (f.pending) and it was stored before cutoff
// (the grace period also covers other processes sharing the store).
func (r *Receiver) planPacks(ctx context.Context, f *folder, garbage []db.SealedChunk, cutoff time.Time) (*packPlan, error) {
	used, err := r.db.SealedPackUsage(ctx, f.id)
	if err != nil {
		return nil, err
	}
	usage := make(map[string]*db.PackUsage, len(used))
	for i := range used {
		usage[string(used[i].Pack)] = &used[i]
	}
	for _, c := range garbage {
		if u := usage[string(c.Pack)]; c.Pack != nil && u != nil {
			u.Chunks--
			u.LiveBytes -= c.Size
		}
	}
	pp := &packPlan{}
	err = r.store.List(ctx, "r/"+f.fk+"/p/", func(info blob.Info) error {
		id, ok := packIDOf(info.Key)
		if !ok || f.isPending(id) {
			return nil
		}
		switch u := usage[string(id)]; {
		case u == nil || u.Chunks <= 0:
			if info.ModTime.Before(cutoff) {
				pp.drop = append(pp.drop, info.Key)
			}
		case 2*u.LiveBytes < info.Size:
			pp.repack = append(pp.repack, *u)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing packs: %w", err)
	}
	return pp, nil
}

// collectPacks deletes the packs pp drops and repacks those it names.
// Ingests are not disturbed: no chunk row uses a dropped pack, none is
// pending, and a repack moves rows without removing any.
func (r *Receiver) collectPacks(ctx context.Context, f *folder, pp *packPlan) error {
	if _, err := blob.DeleteBatch(ctx, r.store, pp.drop); err != nil {
		return fmt.Errorf("deleting packs: %w", err)
	}
	return r.repack(ctx, f, pp.repack)
}

// repack copies the held chunks of the packs old into new packs of about
// the receiver's pack target. Per new pack: it is written durably, then the rows of
// its chunks are moved to it in one transaction, then the old packs it
// emptied are deleted. A crash in between leaves a new pack no row uses,
// or an old one, for a later prune to delete; nothing held is lost. A pack
// that cannot be read whole (missing, or shorter than its rows say) is
// left as it is, with a log line.
func (r *Receiver) repack(ctx context.Context, f *folder, old []db.PackUsage) error {
	target := r.packTarget.Load()
	var (
		b       = new(pack.Builder)
		moves   []db.SealedChunk
		emptied []string
	)
	flush := func() error {
		if b.Count() == 0 {
			return nil
		}
		id := newPackID()
		data := b.Finish()
		if err := r.store.Put(ctx, packKey(f.fk, id), bytes.NewReader(data), int64(len(data))); err != nil {
			return fmt.Errorf("writing a repacked pack: %w", err)
		}
		for i := range moves {
			moves[i].Pack = id
		}
		if err := r.db.MoveSealedChunks(ctx, f.id, moves); err != nil {
			return err
		}
		for _, key := range emptied {
			if err := r.store.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotExist) {
				return fmt.Errorf("deleting a repacked pack: %w", err)
			}
		}
		b, moves, emptied = new(pack.Builder), nil, nil
		return nil
	}
	for _, u := range old {
		if b.Len() > 0 && int64(b.Len())+u.LiveBytes > target {
			if err := flush(); err != nil {
				return err
			}
		}
		key := packKey(f.fk, u.Pack)
		rows, err := r.db.PackedChunks(ctx, f.id, u.Pack)
		if err != nil {
			return err
		}
		data, err := getLimited(ctx, r.store, key, max(target, defaultPackTarget)+2*int64(crypt.MaxSealedChunkSize)+1<<20)
		if err != nil && !errors.Is(err, blob.ErrNotExist) && !errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("reading a pack to repack: %w", err)
		}
		if err == nil && !holds(data, rows) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			r.log.Warn("pack to repack cannot be read, left as it is", "folder", f.id, "key", key, "err", err)
			continue
		}
		for _, c := range rows {
			e := b.Add(c.ID, data[c.Offset:c.Offset+c.Size])
			moves = append(moves, db.SealedChunk{ID: c.ID, Size: c.Size, Offset: e.Offset})
		}
		emptied = append(emptied, key)
	}
	return flush()
}

// holds reports whether every row's range lies inside data, each chunk
// once.
func holds(data []byte, rows []db.SealedChunk) bool {
	seen := make(map[string]bool, len(rows))
	for _, c := range rows {
		if c.Offset < 0 || c.Size <= 0 || c.Offset+c.Size > int64(len(data)) || seen[string(c.ID)] {
			return false
		}
		seen[string(c.ID)] = true
	}
	return true
}
