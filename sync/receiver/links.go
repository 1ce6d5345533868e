package receiver

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/sync/protocol"
)

// linkKey names one (connection, folder).
type linkKey struct {
	peer   Peer
	folder string
}

// link is the work of one (connection, folder): an ingester fed by queue
// and a log sender, each stopped by its own cancel function.
type link struct {
	p      Peer
	folder *folder
	queue  chan *protocol.SealedIndex
	ctx    context.Context // the ingester's; ends with the connection or stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // the ingester and every sender ever started

	mu           sync.Mutex
	senderCancel context.CancelFunc
	senderDone   chan struct{}
	acks         *acks

	// Stored since the link started, for progress events, and the last
	// sequence acknowledged; the ingester's.
	records, chunks, bytes int64
	acked                  int64
}

// stop ends the link's goroutines and waits for them.
func (l *link) stop() {
	l.mu.Lock()
	l.cancel()
	l.mu.Unlock()
	l.wg.Wait()
}

// acks tracks the SealedAcks a log sender waits for.
type acks struct {
	mu      sync.Mutex
	acked   int64
	changed chan struct{} // closed, and replaced, when acked grows
}

func newAcks() *acks { return &acks{changed: make(chan struct{})} }

// add records an ack of everything up to seq.
func (a *acks) add(seq int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if seq > a.acked {
		a.acked = seq
		close(a.changed)
		a.changed = make(chan struct{})
	}
}

// state returns the highest ack and a channel closed when it grows.
func (a *acks) state() (int64, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acked, a.changed
}

// ClusterConfig handles the peer's ClusterConfig entry wf for a folder
// this node holds (the engine calls it only when Holds(wf.Id) and the
// folder is shared with the peer; otherwise it returns ErrNotHeld or
// ErrNotShared). ctx lives as long as the connection. From the peer's
// FolderDevice for this node it takes the cursor: if index_id equals our
// log ID, the log is sent after max_sequence, else from the start (also
// when max_sequence is beyond the log's end). It (re)starts the log sender
// for (p, folder) and makes sure an ingester for (p, folder) runs. Called
// again on every new ClusterConfig from the peer.
func (r *Receiver) ClusterConfig(ctx context.Context, p Peer, wf *protocol.Folder) error {
	f, err := r.lookup(wf.GetId(), crypt.DeviceID(p.Peer()))
	if err != nil {
		return err
	}
	var cursor int64
	for _, d := range wf.GetDevices() {
		if bytes.Equal(d.GetDeviceId(), r.self[:]) && d.GetIndexId() == f.logID {
			cursor = d.GetMaxSequence()
		}
	}
	if cursor > 0 {
		seq, err := r.db.ReceiverLastSequence(ctx, f.id)
		if err != nil {
			return err
		}
		if cursor > seq {
			r.log.Warn("peer claims more of the log than there is; sending it all",
				"folder", f.id, "device", crypt.DeviceID(p.Peer()), "claimed", cursor, "have", seq)
			cursor = 0
		}
	}

	k := linkKey{peer: p, folder: f.id}
	r.mu.Lock()
	l := r.links[k]
	if l == nil || l.ctx.Err() != nil {
		lctx, cancel := context.WithCancel(ctx)
		l = &link{p: p, folder: f, queue: make(chan *protocol.SealedIndex, maxQueued), ctx: lctx, cancel: cancel}
		r.links[k] = l
		l.wg.Go(func() { r.ingest(l) })
	}
	r.mu.Unlock()

	// Replace the log sender.
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return nil // stopped meanwhile by Reload or Closed
	}
	if l.senderCancel != nil {
		l.senderCancel()
		<-l.senderDone
	}
	sctx, cancel := context.WithCancel(l.ctx)
	done := make(chan struct{})
	a := newAcks()
	l.senderCancel, l.senderDone, l.acks = cancel, done, a
	l.wg.Go(func() {
		defer close(done)
		if err := r.sendLog(sctx, l, a, cursor); err != nil && sctx.Err() == nil {
			r.log.Warn("sending record log", "folder", f.id, "device", crypt.DeviceID(p.Peer()), "err", err)
		}
	})
	return nil
}

// link returns the running link of (p, folderID), checking that the
// folder is held and shared with p.
func (r *Receiver) link(p Peer, folderID string) (*link, error) {
	if _, err := r.lookup(folderID, crypt.DeviceID(p.Peer())); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.links[linkKey{peer: p, folder: folderID}], nil
}

// SealedIndex queues idx for the (p, folder) ingester. It never blocks.
// It fails (and the engine ends the connection) if the folder is not held
// or not shared with the peer, if the peer sent no ClusterConfig entry for
// it, or with ErrFlowControl if the peer already has maxQueued (16)
// messages waiting.
func (r *Receiver) SealedIndex(p Peer, idx *protocol.SealedIndex) error {
	l, err := r.link(p, idx.GetFolder())
	if err != nil {
		return err
	}
	if l == nil || l.ctx.Err() != nil {
		return fmt.Errorf("sealed index for folder %q before its cluster config", idx.GetFolder())
	}
	select {
	case l.queue <- idx:
		return nil
	default:
		return fmt.Errorf("folder %q: %w: more than %d sealed indexes queued", idx.GetFolder(), ErrFlowControl, maxQueued)
	}
}

// SealedAck takes the peer's acknowledgement of the log it was sent. It
// never blocks. It fails if the folder is not held or not shared with
// the peer; an ack with no log sender running is ignored.
func (r *Receiver) SealedAck(p Peer, ack *protocol.SealedAck) error {
	l, err := r.link(p, ack.GetFolder())
	if err != nil || l == nil {
		return err
	}
	l.mu.Lock()
	a := l.acks
	l.mu.Unlock()
	if a != nil {
		a.add(ack.GetSequence())
	}
	return nil
}

// sendLog sends p the folder's log after cursor, in messages of about
// r.batchBytes, at most sendWindow of them unacknowledged, and then every
// append as it happens, until ctx ends.
func (r *Receiver) sendLog(ctx context.Context, l *link, a *acks, cursor int64) error {
	f := l.folder
	var unacked []int64 // last sequence of each message not yet acknowledged
	for {
		// Wait for a free slot in the window.
		for {
			acked, changed := a.state()
			for len(unacked) > 0 && unacked[0] <= acked {
				unacked = unacked[1:]
			}
			if len(unacked) < sendWindow {
				break
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		wake := r.wakeOf(f)
		recs, err := r.db.SealedRecordsAfter(ctx, f.id, cursor, readLimit)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		msg := &protocol.SealedIndex{Folder: f.id}
		size, limit := 0, int(r.batchBytes.Load())
		for _, w := range toWire(recs) {
			n := proto.Size(w) + 8
			if len(msg.Records) > 0 && size+n > limit {
				break
			}
			msg.Records = append(msg.Records, w)
			size += n
		}
		if err := l.p.SealedIndex(ctx, msg); err != nil {
			return err
		}
		cursor = msg.Records[len(msg.Records)-1].GetSequence()
		unacked = append(unacked, cursor)
	}
}

// wakeOf returns a channel closed at f's next append.
func (r *Receiver) wakeOf(f *folder) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f.wake
}

// appended wakes the log senders of f.
func (r *Receiver) appended(f *folder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(f.wake)
	f.wake = make(chan struct{})
}

// sortFolders orders ClusterConfig entries by folder ID.
func sortFolders(fs []*protocol.Folder) {
	slices.SortFunc(fs, func(a, b *protocol.Folder) int { return cmp.Compare(a.GetId(), b.GetId()) })
}
