package crypt

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePageSize is the size of a transparent huge page on the platforms Go
// runs Linux on; a system without them ignores the advice.
const hugePageSize = 2 << 20

// hugeScrypt keeps two preparations from freeing each other's ranges.
var hugeScrypt sync.Mutex

// readyForScrypt makes the next allocation of size bytes likely to be
// backed by transparent huge pages, runs fn, which makes it, and then
// takes the advice back.
//
// scrypt allocates its whole work area (256 MiB at work factor 2^18) and
// touches it page by page. Where page faults are dear, faulting in 65,536
// small pages is most of its time: on a paravirtualised VM, one scrypt
// took 1.14 s with small pages and 0.7 s with huge ones. Go asks for no
// huge pages for its heap, and under the common THP setting "madvise" the
// kernel gives none unasked. The scrypt library takes no buffer, so the
// range it will get is prepared instead: allocated but never touched,
// advised MADV_HUGEPAGE, and freed. Go's page allocator takes the lowest
// free range that fits, so scrypt's allocation lands there. Afterwards the
// range is advised MADV_NOHUGEPAGE, so that the small objects Go later
// puts there are not rounded up to huge pages (khugepaged would otherwise
// refill whole 2 MiB pages around them). If anything differs (THP off,
// the range taken by other allocations meanwhile), the allocation is what
// it would have been, only slower.
func readyForScrypt(size int, fn func() error) error {
	if size <= 0 || !ScryptHugePages() {
		return fn()
	}
	hugeScrypt.Lock()
	defer hugeScrypt.Unlock()
	// Free what is garbage now (an earlier scrypt's area) first, or b is
	// placed above it and fn's allocation below, in the old range.
	runtime.GC()
	// Room to align, and some for other goroutines' allocations until fn's.
	b := make([]byte, size+8*hugePageSize)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	off := int((p+hugePageSize-1)&^(hugePageSize-1) - p)
	n := (len(b) - off) &^ (hugePageSize - 1)
	if err := unix.Madvise(b[off:off+n], unix.MADV_HUGEPAGE); err != nil {
		return fn()
	}
	start := p + uintptr(off)
	b = nil
	runtime.GC() // frees b, so that fn's allocation can take its range
	defer unix.Syscall(unix.SYS_MADVISE, start, uintptr(n), unix.MADV_NOHUGEPAGE)
	return fn()
}

// hugeScryptWanted is set by UseHugePagesForScrypt.
var hugeScryptWanted atomic.Bool

// UseHugePagesForScrypt asks for huge pages for scrypt's work area from
// now on. It is for a process that runs scrypt soon after it starts, as a
// recovery does, where the range scrypt gets is fresh from the system. In
// a long-running process that range has usually been used before: the
// kernel then gives it no huge pages at fault time, and the preparation
// costs a clear of the range instead (a node's folder share took
// 0.98-1.52 s prepared against 1.22-1.31 s not, in alternating runs).
func UseHugePagesForScrypt() { hugeScryptWanted.Store(true) }

// ScryptHugePages reports whether scrypt's work area will be given huge
// pages: UseHugePagesForScrypt was called, transparent huge pages are on
// ("always" or "madvise") and not turned off for Go by
// GODEBUG=disablethp=1.
func ScryptHugePages() bool {
	if !hugeScryptWanted.Load() || strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") {
		return false
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && thpOn(string(mode))
}

// thpOn reports whether a transparent_hugepage/enabled setting, such as
// "always [madvise] never", has huge pages on for a region advised
// MADV_HUGEPAGE.
func thpOn(mode string) bool {
	return strings.Contains(mode, "[always]") || strings.Contains(mode, "[madvise]")
}
