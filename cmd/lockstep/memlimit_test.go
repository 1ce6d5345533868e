package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// The limit sits at the floor for a small heap, gives a large live heap
// half again its size, and is off while scrypt runs.
func TestMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	if got := softLimit(10 << 20); got != memoryFloor {
		t.Errorf("limit for a live heap of 10 MiB: %d MiB, want the floor", got>>20)
	}
	if got := softLimit(300 << 20); got != 450<<20 {
		t.Errorf("limit for a live heap of 300 MiB: %d MiB, want 450", got>>20)
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
