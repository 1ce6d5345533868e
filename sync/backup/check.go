package backup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/check"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

// Checks of receivers (sync/check) from this device: what it knows of
// each receiver's log, its own records, and the folder key.

// checkWait is how long a check waits for a receiver to be connected.
var checkWait = 10 * time.Second

// Check checks the receivers of folderID (only receiver, unless it is the
// zero ID) and returns a report per receiver. A receiver that is not
// connected gets a report with an Unreadable problem. The error is for a
// folder that can't be checked at all.
func (b *Backup) Check(ctx context.Context, folderID string, o check.RunOptions, progress func(crypt.DeviceID, check.Progress)) ([]check.Report, error) {
	receiver := o.Receiver
	f := b.folders.Folder(folderID)
	if f == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoFolder, folderID)
	}
	keys := b.keys(ctx, folderID)
	if keys == nil {
		return nil, fmt.Errorf("folder %s is not shared with a receiver from this device (no folder key): nothing to check", folderID)
	}
	targets := f.Receivers()
	if receiver != (crypt.DeviceID{}) {
		found := false
		for _, d := range targets {
			found = found || d == receiver
		}
		if !found {
			return nil, fmt.Errorf("%w: receiver %s does not hold folder %s", ErrNoFolder, receiver.Short(), folderID)
		}
		targets = []crypt.DeviceID{receiver}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("folder %s has no receivers to check", folderID)
	}
	var out []check.Report
	for _, dev := range targets {
		if b.net.WaitPeer(ctx, dev, checkWait) == nil {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			rep := check.Report{Folder: folderID, Receiver: dev.String(), Started: time.Now(), Problems: []check.Problem{}}
			rep.Add(b.unconnected(folderID, dev))
			out = append(out, rep)
			continue
		}
		view := b.view(ctx, folderID, dev)
		set := f.Index()
		opts := check.Options{
			Folder: folderID, Receiver: dev, Self: b.id, Keys: keys, ReadData: o.ReadData,
			Known: check.Known{
				LogID: b.logID(ctx, folderID, dev), Cursor: view.Cursor, Held: view.Held,
				LocalSequence: set.LocalSequence(),
				Seen:          func(fn func(index.Record)) { set.EachRemote(dev, fn) },
				Own: func(fn func(index.Record)) {
					_ = set.EachLocal(func(r index.Record) error {
						if r.Flags&index.FlagLocalOnly == 0 && r.Sequence <= view.Held {
							fn(r)
						}
						return nil
					})
				},
			},
		}
		if progress != nil {
			opts.Progress = func(p check.Progress) { progress(dev, p) }
		}
		if o.Repair {
			opts.Repair = b.repairSource(f, keys, dev, targets)
		}
		req := func(ctx context.Context, r *protocol.Request) ([]byte, error) { return b.net.RequestPeer(ctx, dev, r) }
		rep, err := check.Trusted(ctx, req, opts)
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			rep.Add(check.Problem{Kind: check.Unreadable, Object: "receiver", Detail: err.Error()})
		}
		f.Log().Info("checked a receiver", "device", dev.String(), "mode", rep.Mode, "records", rep.Records,
			"chunks", rep.Chunks, "bytesRead", rep.BytesRead, "result", rep.Summary(), "took", rep.Duration.Round(time.Millisecond))
		out = append(out, rep)
	}
	return out, nil
}

// unconnected is the problem of a receiver a check could not reach: the
// rollback or fork this device refused it for, when it did.
func (b *Backup) unconnected(folderID string, dev crypt.DeviceID) check.Problem {
	s := b.share(folderID)
	s.mu.Lock()
	msg := s.recvErrs[dev]
	s.mu.Unlock()
	switch {
	case strings.HasPrefix(msg, ErrRollback.Error()):
		return check.Problem{Kind: check.RolledBack, Object: "log", Detail: "refused when it connected: " + msg}
	case strings.HasPrefix(msg, ErrFalseClaim.Error()):
		return check.Problem{Kind: check.Forked, Object: "log", Detail: "refused when it connected: " + msg}
	case msg != "":
		return check.Problem{Kind: check.Unreadable, Object: "receiver", Detail: fmt.Sprintf("receiver %s is not connected; its last problem: %s", dev.Short(), msg)}
	}
	return check.Problem{Kind: check.Unreadable, Object: "receiver", Detail: fmt.Sprintf("receiver %s is not connected", dev.Short())}
}

// repairSource finds a sealed body for a chunk receiver dev lacks: sealed
// again from this device's files when one of them holds its plaintext
// now (compressed or not, whichever gives the size the receiver lists),
// else as another receiver of the folder holds it, opened first to prove
// it. The index of local blocks is built on first use.
func (b *Backup) repairSource(f Folder, keys *crypt.Keys, dev crypt.DeviceID, receivers []crypt.DeviceID) func(context.Context, crypt.ChunkID, [32]byte, int64) ([]byte, string, error) {
	var local map[[32]byte]index.Record // a record with the block, per hash
	return func(ctx context.Context, id crypt.ChunkID, hash [32]byte, size int64) ([]byte, string, error) {
		if local == nil {
			local = map[[32]byte]index.Record{}
			_ = f.Index().EachLocal(func(r index.Record) error {
				for _, blk := range r.Blocks {
					local[blk.Hash] = index.Record{Name: r.Name, Blocks: []index.Block{blk}}
				}
				return nil
			})
		}
		if r, ok := local[hash]; ok {
			blk := r.Blocks[0]
			plain, err := f.ReadBlock(r.Name, blk.Offset, blk.Size)
			if err == nil && chunk.HashOf(plain) == hash {
				for _, compress := range []bool{!b.opts.NoCompression, b.opts.NoCompression} {
					_, body, err := keys.SealChunk(plain, hash, compress)
					if err == nil && int64(len(body)) == size {
						protocol.Recycle(plain)
						return body, "this device's " + r.Name, nil
					}
				}
			}
			protocol.Recycle(plain)
		}
		for _, other := range receivers {
			if other == dev || !b.net.Connected(other) {
				continue
			}
			body, err := b.net.RequestPeer(ctx, other, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_SEALED_CHUNK, Folder: f.ID(), ChunkId: id[:], Size: uint32(crypt.MaxSealedChunkSize)})
			if err != nil {
				continue
			}
			if _, err := keys.OpenBlockTo(nil, hash, body); err != nil || int64(len(body)) != size {
				continue
			}
			return body, "receiver " + other.Short().String(), nil
		}
		return nil, "", errors.New("neither this device's files nor another receiver hold it")
	}
}
