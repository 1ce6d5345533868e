package engine

import (
	"math/bits"
	"sync"
)

// Block buffers are pooled by power-of-two size class: allocating fresh
// memory for every block (and faulting its pages in) cost more than the
// whole transfer in measurements on a 2-core VM.
const (
	minClassBits = 17 // 128 KiB, the smallest chunk
	maxClassBits = 23 // 8 MiB, above the largest chunk
)

var blockPools [maxClassBits - minClassBits + 1]sync.Pool

func sizeClass(n int) int {
	if n <= 1<<minClassBits {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassBits
}

// getBlock returns a buffer of length n, from the pool when it can.
func getBlock(n int) []byte {
	c := sizeClass(n)
	if c >= len(blockPools) {
		return make([]byte, n)
	}
	if b, ok := blockPools[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<(c+minClassBits))
}

// putBlock gives a buffer from getBlock back. The caller must not use it
// afterwards.
func putBlock(b []byte) {
	c := sizeClass(cap(b))
	if c >= len(blockPools) || cap(b) != 1<<(c+minClassBits) {
		return // not one of ours
	}
	b = b[:0]
	blockPools[c].Put(&b)
}

// Release implements protocol.Releaser: a served block's buffer is reused
// once its frame is encoded.
func (e *Engine) Release(data []byte) { putBlock(data) }
