package backup

import (
	"context"
	"sync"

	"lockstep/crypt"
	"lockstep/sync/index"
)

// presealBudget bounds the sealed bodies presealing keeps: the inline
// chunks of the first messages of an upload.
const presealBudget = 32 << 20

// presealed are sealed bodies of small chunks, made while scrypt seals a
// new folder key's envelope (about a second, with the other cores idle),
// for the first upload to send inline instead of reading and sealing
// them then. Nothing reaches the receiver before its envelope: a crash
// in that second must not leave data there that no password opens. A
// body is the same whenever it is made (the sealing is deterministic and
// checked against the block's hash), so one made early is as good as
// one made late.
type presealed struct {
	mu     sync.Mutex
	bodies map[crypt.ChunkID][]byte
}

// take returns the body of id, once, or nil.
func (p *presealed) take(id crypt.ChunkID) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	body := p.bodies[id]
	delete(p.bodies, id)
	return body
}

// drop forgets every body.
func (p *presealed) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bodies = nil
}

// preseal seals the small chunks of f's local files under keys, in the
// order an upload sends them, into its share's presealed until ctx ends or the
// budget is full. It returns how many bytes it sealed.
func (b *Backup) preseal(ctx context.Context, f Folder, keys *crypt.Keys) int64 {
	u := &upload{b: b, f: f, keys: keys}
	ps := &b.share(f.ID()).presealed
	bodies := map[crypt.ChunkID][]byte{}
	var total int64
	defer func() {
		ps.mu.Lock()
		ps.bodies = bodies
		ps.mu.Unlock()
	}()
	for _, r := range f.Index().LocalSince(0) {
		if r.Deleted || r.Type != index.File {
			continue
		}
		for _, b := range r.Blocks {
			if ctx.Err() != nil {
				return total
			}
			id := keys.ChunkID(b.Hash)
			if b.Size > inlineChunk || bodies[id] != nil {
				continue
			}
			body, err := u.sealedBody(blockRef{name: r.Name, offset: b.Offset, size: b.Size, hash: b.Hash}, nil)
			if err != nil {
				continue // the upload meets it again and decides
			}
			if total += int64(len(body)); total > presealBudget {
				return total
			}
			bodies[id] = body
		}
	}
	return total
}

// presealWhile runs preseal under ring while seal runs, and returns seal's
// result once both have ended.
func (b *Backup) presealWhile(ctx context.Context, f Folder, ring []crypt.FolderKey, seal func() ([]byte, error)) ([]byte, error) {
	keys, err := crypt.DeriveRing(ring)
	if err != nil {
		return seal()
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.preseal(pctx, f, keys)
	}()
	out, err := seal()
	stop()
	<-done
	return out, err
}
