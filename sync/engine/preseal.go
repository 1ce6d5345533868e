package engine

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
// order an upload sends them, into f.presealed until ctx ends or the
// budget is full. It returns how many bytes it sealed.
func (f *folder) preseal(ctx context.Context, keys *crypt.Keys) int64 {
	u := &upload{f: f, keys: keys}
	bodies := map[crypt.ChunkID][]byte{}
	var total int64
	defer func() {
		f.presealed.mu.Lock()
		f.presealed.bodies = bodies
		f.presealed.mu.Unlock()
	}()
	for _, r := range f.set.LocalSince(0) {
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

// presealWhile runs preseal under key while seal runs, and returns seal's
// result once both have ended.
func (f *folder) presealWhile(ctx context.Context, key crypt.FolderKey, seal func() ([]byte, error)) ([]byte, error) {
	keys, err := crypt.DeriveKeys(key)
	if err != nil {
		return seal()
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.preseal(pctx, keys)
	}()
	out, err := seal()
	stop()
	<-done
	return out, err
}
