package protocol

import (
	"math/bits"
	"sync"
)

// Frame buffers are recycled: chunk-sized frames would otherwise cost the
// garbage collector two allocations of their size each.
//
// Buffers come in classes a quarter of a power of two apart (1 KiB,
// 1.25 KiB, 1.5 KiB, 1.75 KiB, 2 KiB, ...), so a buffer is at most a
// quarter larger than asked for. With classes a power of two apart, a
// chunk of just over 1 MiB took a 2 MiB buffer: a receiver's fetches in
// flight and a recovery's prefetched chunks held about half again the
// memory their chunks needed.
const (
	minPooledSize = 1 << 10
	// maxPooledSize holds the largest chunk, sealed and framed.
	maxPooledSize = 10 << 20
)

// classSizes are the classes' capacities, ascending.
var classSizes = func() []int {
	var s []int
	for base := minPooledSize; ; base *= 2 {
		for q := range 4 {
			size := base + q*base/4
			if size > maxPooledSize {
				return s
			}
			s = append(s, size)
		}
	}
}()

// bufPools holds, per class c, buffers whose capacity is at least
// classSizes[c].
var bufPools = make([]sync.Pool, len(classSizes))

// classAtLeast is the smallest class holding n bytes, or -1 for none.
func classAtLeast(n int) int {
	if n > maxPooledSize {
		return -1
	}
	n = max(n, minPooledSize)
	// n is in (2^(e-1), 2^e]: its class is among the four below 2^e or 2^e.
	e := bits.Len(uint(n - 1))
	c := (e - 1 - bits.Len(minPooledSize-1)) * 4
	for c < 0 || classSizes[c] < n {
		c++
	}
	return c
}

// getBuf returns an empty buffer with capacity at least n.
func getBuf(n int) []byte {
	c := classAtLeast(n)
	if c < 0 {
		return make([]byte, 0, n)
	}
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, classSizes[c])
}

// putBuf recycles b, which the caller must no longer use.
func putBuf(b []byte) {
	n := cap(b)
	if n < minPooledSize {
		return
	}
	// The largest class b can serve.
	c := classAtLeast(min(n, maxPooledSize))
	if classSizes[c] > n {
		c--
	}
	b = b[:0]
	bufPools[c].Put(&b)
}
