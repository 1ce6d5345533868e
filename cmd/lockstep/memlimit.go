package main

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Go's collector lets the heap grow to twice what is live before it
// collects, and returns freed memory to the system slowly (minutes). A
// receiver whose live heap is 30-40 MiB held 140-160 MiB so: a peak of
// garbage between two collections, then 80 MiB freed but kept. The
// memory a node keeps is what decides whether it fits a small NAS or
// VPS beside other things, so lockstep sets Go's soft memory limit: a
// collection comes at memoryFloor, and what is freed above it is
// returned at once. Above the floor the limit is the live heap and half
// again (Go's own default lets it double): a node with a large folder
// collects more often than Go would, but never over and over near its
// limit. At 100,000 files the live heap of a node pulling them is about
// 90 MB.
// While scrypt runs, the limit is off: its 256 MiB are live and
// returned after (crypt.KDFObserver).
//
// GOMEMLIMIT set in the environment turns all this off: the user's
// limit stands.
const memoryFloor = 64 << 20

// memoryLimiter adjusts the limit as the live heap moves.
type memoryLimiter struct {
	mu  sync.Mutex
	off bool // scrypt is running
}

var limiter *memoryLimiter

// startMemoryLimit sets the soft memory limit and keeps it adjusted,
// unless GOMEMLIMIT is set.
func startMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limiter = &memoryLimiter{}
	limiter.adjust()
	go func() {
		for range time.Tick(time.Second) {
			limiter.adjust()
		}
	}()
}

// adjust sets the limit from the live heap now.
func (l *memoryLimiter) adjust() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off {
		return
	}
	debug.SetMemoryLimit(softLimit(liveHeap()))
}

// softLimit is the limit for a live heap of live bytes.
func softLimit(live uint64) int64 {
	return int64(max(memoryFloor, live+live/2))
}

// suspend lifts the limit while scrypt runs.
func (l *memoryLimiter) suspend() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.off = true
	debug.SetMemoryLimit(math.MaxInt64)
}

// resume sets it again after.
func (l *memoryLimiter) resume() {
	l.mu.Lock()
	l.off = false
	l.mu.Unlock()
	l.adjust()
}

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// liveHeap is the heap the last collection found live, in bytes.
func liveHeap() uint64 {
	metrics.Read(liveSample)
	if liveSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return liveSample[0].Value.Uint64()
}
