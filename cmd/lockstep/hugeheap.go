// Huge pages for the heap: adviseHugeHeap asks the kernel to back the Go
// heap with transparent huge pages.
//
// On the paravirtualised VMs lockstep is measured on, every page fault
// costs a trip to the hypervisor: a recovery faulted in ~29,000 small pages
// of fresh heap (chunk buffers, decrypted chunks, records) and spent 13% of
// its CPU doing so, and scrypt's 256 MiB work area was most of its second.
// Go asks for no huge pages for its heap, and under the common setting
// "madvise" the kernel gives none unasked. adviseHugeHeap reserves a range of heap
// and advises it MADV_HUGEPAGE before anything is allocated there; the
// heap's allocations then fault in 2 MiB at a time (docs/performance.md,
// "Measuring on a VM" and "What paid").
//
// Invariants:
//   - adviseHugeHeap is best effort: where huge pages are off (or Go's are, with
//     GODEBUG=disablethp=1), or the system refuses, it does nothing and
//     reports false; memory is then what it would have been.
//   - It costs no memory by itself: the range is never touched, and a page
//     of it counts towards the resident set only once the heap uses it.
//   - The range is at most a quarter of the machine's memory, and none on
//     a 32-bit system or under strict overcommit (vm.overcommit_memory=2),
//     where reserving it could fail the process or starve it of its
//     commit limit.
//
// It starts no goroutines.

package main

import "sync/atomic"

// hugeHeapMax is the largest heap range adviseHugeHeap prepares. The heap of a node
// or of a recovery stays well below it (scrypt's 256 MiB included);
// allocations beyond the range get small pages, as without adviseHugeHeap.
const hugeHeapMax = 1 << 30

// hugeHeapMin is the smallest range worth preparing; a machine with less than
// four times that is too small to spare a quarter of it.
const hugeHeapMin = 64 << 20

const hugePage = 2 << 20

// hugeHeapRange is the range adviseHugeHeap prepares for a process with the given
// word size, vm.overcommit_memory setting and memory: 0 for none.
func hugeHeapRange(intSize int, overcommit string, totalRAM uint64) int {
	if intSize < 64 || overcommit == "2" {
		return 0
	}
	n := min(uint64(hugeHeapMax), totalRAM/4) &^ (hugePage - 1)
	if n < hugeHeapMin {
		return 0
	}
	return int(n)
}

var hugeHeapOn atomic.Bool

// hugeHeapAdvised reports whether adviseHugeHeap prepared the heap.
func hugeHeapAdvised() bool { return hugeHeapOn.Load() }
