package hugeheap

import (
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Advise prepares Size bytes of heap for huge pages; see the package
// comment. Call it once, early in a process that allocates much, before
// the heap has grown: Go's page allocator places each allocation at the
// lowest free address that fits, so what comes after lands in the range.
// It reports whether the range was advised.
func Advise() bool {
	if advised.Load() {
		return true
	}
	if strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") {
		return false
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !thpOn(string(mode)) {
		return false
	}
	// Fresh from the system and never written, so still without pages.
	b := make([]byte, Size)
	if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
		return false
	}
	b = nil
	runtime.GC() // frees the range for the allocations to come
	advised.Store(true)
	return true
}

// thpOn reports whether a transparent_hugepage/enabled setting, such as
// "always [madvise] never", has huge pages on for a range advised
// MADV_HUGEPAGE.
func thpOn(mode string) bool {
	return strings.Contains(mode, "[always]") || strings.Contains(mode, "[madvise]")
}
