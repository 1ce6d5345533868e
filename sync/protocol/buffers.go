package protocol

import (
	"math/bits"
	"sync"
)

// Frame buffers are recycled: chunk-sized frames would otherwise cost the
// garbage collector two allocations of their size each.
const (
	minPooledClass = 10 // 1 KiB
	maxPooledClass = 23 // 8 MiB: the largest chunk plus framing
)

// bufPools holds, per class c, buffers whose capacity is at least 1<<c.
var bufPools [maxPooledClass + 1]sync.Pool

// getBuf returns an empty buffer with capacity at least n.
func getBuf(n int) []byte {
	c := bits.Len(uint(max(n, 1) - 1)) // smallest c with 1<<c >= n
	c = max(c, minPooledClass)
	if c > maxPooledClass {
		return make([]byte, 0, n)
	}
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<c)
}

// putBuf recycles b, which the caller must no longer use.
func putBuf(b []byte) {
	c := bits.Len(uint(cap(b))) - 1 // largest c with 1<<c <= cap
	if c < minPooledClass || c > maxPooledClass {
		return
	}
	b = b[:0]
	bufPools[c].Put(&b)
}
