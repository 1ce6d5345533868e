package main

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Go's collector lets the heap grow to twice what is live before it
// collects, and returns freed memory to the system slowly (minutes). A
// receiver whose live heap is 30-40 MiB held 140-160 MiB so: a peak of
// garbage between two collections, then 80 MiB freed but kept. The
// memory a node keeps is what decides whether it fits a small NAS or
// VPS beside other things, so lockstep sets Go's soft memory limit: a
// collection comes at memoryFloor, and what is freed above it is
// returned at once.
//
// Above the floor the limit is the live heap and half again (Go's own
// default lets it double), less where little of it holds pointers: a
// collection's work is marking what holds pointers, so a heap of plain
// bytes is given as much room as it has pointers, and at least
// memoryHeadroom. A node with a large folder (records full of pointers;
// about 90 MB live while it pulls 100,000 files) collects more often
// than Go would, but never over and over near its limit. A receiver
// whose live heap is mostly pack buffers, bytes the collector never
// reads, is not given half of them again in garbage: serving a
// recovery, it peaked at 104-133 MiB with its limit at 1.5 times the
// live heap, 101-113 MiB with this one (packs of 4 MiB then).
// The floor was 64 MiB: at 48, a receiver (a local store) peaked at
// 79-81 MiB taking the standard set and 81-82 serving its recovery,
// against 92 and 97-99, in the same time (2 alternating pairs).
// The limit follows the live heap at every collection.
// While scrypt runs, the limit is off: its 256 MiB are live and
// returned after (crypt.KDFObserver).
//
// GOMEMLIMIT set in the environment turns all this off: the user's
// limit stands.
const (
	memoryFloor    = 48 << 20
	memoryHeadroom = 16 << 20
)

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
	afterEachGC(limiter.adjust)
}

// afterEachGC calls fn after every collection, in a goroutine of the
// runtime's finalizers: an object nothing refers to is finalized once a
// collection has found it unreachable, and its finalizer makes the next.
func afterEachGC(fn func()) {
	type sentinel struct{ _ [16]byte } // a finalizer needs a heap object, not a tiny one
	var arm func(*sentinel)
	arm = func(*sentinel) {
		fn()
		runtime.SetFinalizer(&sentinel{}, arm)
	}
	runtime.SetFinalizer(&sentinel{}, arm)
}

// adjust sets the limit from the live heap now.
func (l *memoryLimiter) adjust() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off {
		return
	}
	live, scan := liveHeap()
	debug.SetMemoryLimit(softLimit(live, scan))
}

// softLimit is the limit for a live heap of live bytes, scan of them
// holding pointers.
func softLimit(live, scan uint64) int64 {
	room := min(live/2, max(scan, memoryHeadroom))
	return int64(max(memoryFloor, live+room))
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

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/heap:bytes"}}

// liveHeap is the heap the last collection found live, and how much of
// the heap holds pointers, in bytes.
func liveHeap() (live, scan uint64) {
	metrics.Read(liveSample)
	if liveSample[0].Value.Kind() == metrics.KindUint64 {
		live = liveSample[0].Value.Uint64()
	}
	if liveSample[1].Value.Kind() == metrics.KindUint64 {
		scan = liveSample[1].Value.Uint64()
	}
	return live, scan
}
