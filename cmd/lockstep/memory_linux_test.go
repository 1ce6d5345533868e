package main

import (
	"crypto/rand"
	"runtime"
	"runtime/debug"
	"testing"
)

// The peak outside scrypt leaves out what a KDF held, and keeps what was
// held before and after it; the overall peak keeps both.
func TestMemoryPeakOutsideKDF(t *testing.T) {
	m := &memWatch{reset: true}
	touch := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b[:4096])
		for i := 0; i < n; i += 4096 {
			b[i] = 1
		}
		return b
	}
	before := touch(48 << 20)
	runtime.KeepAlive(before)
	before = nil
	debug.FreeOSMemory()
	st0 := m.status()
	if st0 == nil {
		t.Skip("no /proc/self/status")
	}
	if st0.PeakOutsideKDF < 48<<20 {
		t.Fatalf("peak outside scrypt %d MiB before any, want at least the 48 MiB touched", st0.PeakOutsideKDF>>20)
	}

	m.KDFStarted()
	big := touch(256 << 20)
	during := m.status()
	runtime.KeepAlive(big)
	big = nil
	debug.FreeOSMemory()
	m.KDFDone()
	if !m.reset {
		t.Skip("the peak can't be reset here (/proc/self/clear_refs)")
	}
	after := m.status()
	if during.PeakOutsideKDF > st0.PeakOutsideKDF+(16<<20) {
		t.Errorf("while the KDF ran, the peak outside it moved from %d to %d MiB", st0.PeakOutsideKDF>>20, during.PeakOutsideKDF>>20)
	}
	if after.Peak < 256<<20 {
		t.Errorf("overall peak %d MiB, want the KDF's 256 MiB in it", after.Peak>>20)
	}
	if after.PeakOutsideKDF >= 200<<20 {
		t.Errorf("peak outside scrypt %d MiB after it, want the KDF's 256 MiB left out", after.PeakOutsideKDF>>20)
	}
	if after.PeakOutsideKDF < st0.PeakOutsideKDF {
		t.Errorf("peak outside scrypt fell from %d to %d MiB", st0.PeakOutsideKDF>>20, after.PeakOutsideKDF>>20)
	}
	// What comes after counts again.
	later := touch(224 << 20)
	runtime.KeepAlive(later)
	if st := m.status(); st.PeakOutsideKDF < 224<<20 {
		t.Errorf("peak outside scrypt %d MiB after touching 224 MiB outside it", st.PeakOutsideKDF>>20)
	}
}
