package engine

import "lockstep/sync/protocol"

// Block buffers come from the protocol's buffer pool, the one the
// connections read chunks into and write frames from: allocating fresh
// memory for every block (and faulting its pages in) cost more than the
// whole transfer in measurements on a 2-core VM, and one pool lets a
// buffer go round between reading a block, sending it, and receiving one.

// getBlock returns a buffer of length n.
func getBlock(n int) []byte { return protocol.Buffer(n)[:n] }

// putBlock gives a buffer back to the pool (one not from a pool is
// dropped). The caller must not use it afterwards.
func putBlock(b []byte) { protocol.Recycle(b) }

// Release implements protocol.Releaser: a served block's buffer is reused
// once its frame is encoded.
func (e *Engine) Release(data []byte) { putBlock(data) }
