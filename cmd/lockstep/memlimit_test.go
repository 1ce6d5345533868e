package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// The limit sits at the floor for a small heap, gives a large live heap
// half again its size but no more room than it has pointers (and at
// least a fixed headroom), and is off while scrypt runs.
func TestMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	if got := softLimit(10<<20, 10<<20); got != memoryFloor {
		t.Errorf("limit for a live heap of 10 MiB: %d MiB, want the floor", got>>20)
	}
	if got := softLimit(300<<20, 300<<20); got != 450<<20 {
		t.Errorf("limit for a live heap of 300 MiB of pointers: %d MiB, want 450", got>>20)
	}
	if got := softLimit(100<<20, 30<<20); got != 130<<20 {
		t.Errorf("limit for a live heap of 100 MiB, 30 of them pointers: %d MiB, want 130", got>>20)
	}
	if got := softLimit(100<<20, 80<<20); got != 150<<20 {
		t.Errorf("limit for a live heap of 100 MiB, 80 of them pointers: %d MiB, want 150", got>>20)
	}
	if got := softLimit(70<<20, 4<<20); got != 70<<20+memoryHeadroom {
		t.Errorf("limit for a live heap of 70 MiB of plain bytes: %d MiB, want 70 and the headroom", got>>20)
	}
	l := &memoryLimiter{}
	l.adjust()
	if got := debug.SetMemoryLimit(-1); got < memoryFloor || got == math.MaxInt64 {
		t.Errorf("limit after adjust: %d", got)
	}
	l.suspend()
	l.adjust() // the ticker comes while scrypt runs
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit while scrypt runs: %d MiB, want none", got>>20)
	}
	l.resume()
	if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 {
		t.Error("limit not set again after scrypt")
	}
}

// The limit follows the heap at every collection, not on a timer: a
// receiver reading packs grows its live heap by tens of MiB in a second.
func TestAfterEachGC(t *testing.T) {
	calls := make(chan struct{}, 16)
	afterEachGC(func() {
		select {
		case calls <- struct{}{}:
		default:
		}
	})
	for i := range 3 {
		runtime.GC()
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("no call after collection %d", i+1)
		}
	}
}
