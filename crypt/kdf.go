package crypt

import (
	"runtime/debug"
	"sync/atomic"
)

// KDFObserver is told when a password's scrypt starts and ends. Its
// 256 MiB work area is most of a node's memory while it runs, and lasts
// about a second; a process measures its memory apart from it (the
// targets in docs/performance.md are "outside scrypt").
type KDFObserver interface {
	KDFStarted()
	// KDFDone is called after the work area was returned to the system.
	KDFDone()
}

var kdfObserver atomic.Pointer[KDFObserver]

// ObserveKDF makes o the process's KDFObserver (nil for none).
func ObserveKDF(o KDFObserver) {
	if o == nil {
		kdfObserver.Store(nil)
		return
	}
	kdfObserver.Store(&o)
}

// withKDF runs f, which runs scrypt, and then hands scrypt's work area
// back to the system. Go would keep the freed 256 MiB for minutes (its
// scavenger returns memory slowly) and a node seals or opens a password
// rarely, so the cost of a forced collection (a few milliseconds) is
// small beside the memory kept.
func withKDF[T any](f func() (T, error)) (T, error) {
	o := kdfObserver.Load()
	if o != nil {
		(*o).KDFStarted()
	}
	v, err := f()
	debug.FreeOSMemory()
	if o != nil {
		(*o).KDFDone()
	}
	return v, err
}
