package receiver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/db"
)

// replayTail commits log objects the store holds beyond the database's
// last record. Ingest writes a batch's log object before it commits the
// batch, and the database may lose its last commits in a power loss
// (synchronous=NORMAL): either way the batch's chunks are durable and its
// records were valid, and devices may have seen them served, so they are
// committed now rather than lost. Log objects that no longer parse, or
// whose sequences do not follow on, end the replay with a log line: the
// next batch overwrites them.
func (r *Receiver) replayTail(ctx context.Context, folderID, fk string) error {
	last, err := r.db.ReceiverLastSequence(ctx, folderID)
	if err != nil {
		return err
	}
	var keys []string
	err = r.store.List(ctx, "r/"+fk+"/log/", func(info blob.Info) error {
		if first, err := logFirst(info.Key); err == nil && first > last {
			keys = append(keys, info.Key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the log: %w", err)
	}
	var orphans map[string]db.SealedChunk // chunks of packs no row uses, read once needed
	for _, key := range keys {
		data, err := getLimited(ctx, r.store, key, maxLogSize)
		if err != nil {
			return err
		}
		wire, err := parseLog(logFolder(fk, folderID), key, data)
		if first, _ := logFirst(key); err != nil || first != last+1 {
			r.log.Warn("log object beyond the database does not follow on; left for the next batch to replace", "folder", folderID, "key", key, "err", err)
			return nil
		}
		var (
			recs   []db.SealedRecord
			chunks []db.SealedChunk
			seen   = map[string]bool{}
		)
		for _, w := range wire {
			for _, c := range w.GetChunks() {
				if seen[string(c)] {
					continue
				}
				seen[string(c)] = true
				has, err := r.db.HasSealedChunk(ctx, folderID, c)
				if err != nil {
					return err
				}
				if has {
					continue
				}
				info, err := r.store.Stat(ctx, chunkKey(fk, c))
				if err == nil {
					chunks = append(chunks, db.SealedChunk{ID: c, Size: info.Size, StoredAt: info.ModTime})
					continue
				}
				if !errors.Is(err, blob.ErrNotExist) {
					return err
				}
				if orphans == nil {
					if orphans, err = r.orphanPacks(ctx, folderID, fk); err != nil {
						return err
					}
				}
				loc, ok := orphans[string(c)]
				if !ok {
					r.log.Warn("log object beyond the database references a missing chunk; left for the next batch to replace", "folder", folderID, "key", key)
					return nil
				}
				chunks = append(chunks, loc)
			}
			recs = append(recs, fromWire(w, w.GetSequence(), time.Unix(0, w.GetStoredNs())))
		}
		if err := r.db.AppendSealed(ctx, folderID, recs, chunks); err != nil {
			return fmt.Errorf("replaying %s: %w", key, err)
		}
		last = wire[len(wire)-1].GetSequence()
		r.log.Info("replayed records the database had lost from the store's log", "folder", folderID, "key", key, "records", len(recs))
	}
	return nil
}
