package receiver

import (
	"context"
	"time"
)

// Scheduled retention: a receiver applies its folders' policies on its
// own, so a backup that nobody looks after still honours them.
const (
	// PruneInterval is how often Serve prunes every held folder.
	PruneInterval = time.Hour
	// ScheduledGrace is the grace period of scheduled prunes, as the CLI's
	// default.
	ScheduledGrace = time.Hour
	// cleanInterval is how often Serve removes the store's stale
	// temporary files (besides at its start).
	cleanInterval = time.Hour
	// tempGrace: a store's temporary file last written this long ago
	// belongs to no write in progress.
	tempGrace = time.Hour
)

// tempCleaner is the optional ability of a blob store to remove the
// temporary files writes interrupted by a crash left behind, those last
// modified before before (local.Store has it).
type tempCleaner interface {
	Clean(ctx context.Context, before time.Time) (int, error)
}

// Serve prunes every held folder that has a retention policy every
// interval (PruneInterval when 0) until ctx ends. If the store can
// (tempCleaner), it also removes the temporary files crashed writes left
// in it, older than tempGrace so that no write in progress loses its
// own: at start and every cleanInterval.
func (r *Receiver) Serve(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = PruneInterval
	}
	r.cleanTemps(ctx)
	prune := time.NewTicker(interval)
	defer prune.Stop()
	clean := time.NewTicker(cleanInterval)
	defer clean.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-prune.C:
			r.pruneAll(ctx)
		case <-clean.C:
			r.cleanTemps(ctx)
		}
	}
}

// cleanTemps removes the store's temporary files older than tempGrace,
// if the store can.
func (r *Receiver) cleanTemps(ctx context.Context) {
	c, ok := r.store.(tempCleaner)
	if !ok {
		return
	}
	n, err := c.Clean(ctx, time.Now().Add(-tempGrace))
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Warn("removing stale temporary files from the store", "err", err)
	case n > 0:
		r.log.Info("removed stale temporary files from the store", "files", n)
	}
}

// pruneAll prunes each held folder with a non-zero policy.
func (r *Receiver) pruneAll(ctx context.Context) {
	r.mu.Lock()
	ids := make([]string, 0, len(r.folders))
	for id := range r.folders {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		p, err := r.Retention(ctx, id)
		if err != nil || p == (Policy{}) {
			continue
		}
		res, err := r.Prune(ctx, id, PruneOptions{Grace: ScheduledGrace})
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn("scheduled prune", "folder", id, "err", err)
		case res.Records > 0 || res.Chunks > 0:
			r.log.Info("scheduled prune", "folder", id, "versions", res.Records, "chunks", res.Chunks, "bytes", res.Bytes)
		}
	}
}
