package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// adviseHugeHeap prepares up to hugeHeapMax bytes of heap for huge pages; see the package
// comment. Call it once, early in a process that allocates much, before
// the heap has grown: Go's page allocator places each allocation at the
// lowest free address that fits, so what comes after lands in the range.
// It reports whether the range was hugeHeapOn.
func adviseHugeHeap() bool {
	if hugeHeapOn.Load() {
		return true
	}
	if strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") {
		return false
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !thpOn(string(mode)) {
		return false
	}
	overcommit, _ := os.ReadFile("/proc/sys/vm/overcommit_memory")
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return false
	}
	size := hugeHeapRange(strconv.IntSize, strings.TrimSpace(string(overcommit)), uint64(si.Totalram)*uint64(si.Unit))
	if size == 0 {
		return false
	}
	// Early in a process, a range this large comes fresh from the system:
	// Go does not clear it, so it stays without pages. (Taken from memory
	// the heap had used, it would be cleared, pages and all.)
	b := make([]byte, size)
	if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
		return false
	}
	b = nil
	runtime.GC() // frees the range for the allocations to come
	hugeHeapOn.Store(true)
	return true
}

// thpOn reports whether a transparent_hugepage/enabled setting, such as
// "always [madvise] never", has huge pages on for a range hugeHeapOn
// MADV_HUGEPAGE.
func thpOn(mode string) bool {
	return strings.Contains(mode, "[always]") || strings.Contains(mode, "[madvise]")
}
