package main

import (
	"encoding/json"
	"os"
	"sync"

	"lockstep/crypt"
	"lockstep/web"
)

// memWatch measures the process's resident memory: now, at its peak, and
// at its peak outside scrypt (crypt.KDFObserver), whose 256 MiB lasts
// about a second and is returned after. The peak outside scrypt is what
// docs/performance.md's memory targets are about; the benchmarks read it
// from a node's status, or from LOCKSTEP_MEMSTATS for any command.
//
// It reads the kernel's own peak (VmHWM), which no sampling can miss, and
// resets it when scrypt ends (Linux's clear_refs), after noting it: the
// peak outside scrypt is the highest of those noted before each scrypt
// began and of the one since the last ended.
type memWatch struct {
	mu      sync.Mutex
	running int   // scrypt calls under way
	outside int64 // highest peak noted before an scrypt began
	all     int64 // highest peak noted when one ended
	// reset is whether the peak could be reset; without it, the peak
	// outside scrypt is unknown.
	reset bool
}

var memory = &memWatch{reset: true}

func (m *memWatch) KDFStarted() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running == 0 {
		_, hwm := readMemory()
		m.outside = max(m.outside, hwm)
		if limiter != nil {
			limiter.suspend()
		}
	}
	m.running++
}

func (m *memWatch) KDFDone() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running--
	if m.running == 0 {
		_, hwm := readMemory()
		m.all = max(m.all, hwm)
		m.reset = m.reset && resetPeak() == nil
		if limiter != nil {
			limiter.resume()
		}
	}
}

// status is the process's memory now.
func (m *memWatch) status() *web.MemoryStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	rss, hwm := readMemory()
	if rss == 0 {
		return nil
	}
	st := &web.MemoryStatus{RSS: rss, Peak: max(m.all, hwm)}
	switch {
	case !m.reset:
	case m.running > 0:
		st.PeakOutsideKDF = m.outside
	default:
		st.PeakOutsideKDF = max(m.outside, hwm)
	}
	return st
}

// writeMemStats writes the process's memory status as JSON to the file
// LOCKSTEP_MEMSTATS names, if any: how a benchmark learns the peaks of a
// command that is not a daemon (a recovery, a check).
func writeMemStats() {
	path := os.Getenv("LOCKSTEP_MEMSTATS")
	if path == "" {
		return
	}
	if b, err := json.Marshal(memory.status()); err == nil {
		os.WriteFile(path, b, 0o644)
	}
}

func init() { crypt.ObserveKDF(memory) }
