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
)

// Serve prunes every held folder that has a retention policy every
// interval (PruneInterval when 0) until ctx ends.
func (r *Receiver) Serve(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = PruneInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.pruneAll(ctx)
		}
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
