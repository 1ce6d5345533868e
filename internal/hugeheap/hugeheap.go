// Package hugeheap asks the kernel to back the Go heap with transparent
// huge pages.
//
// On the paravirtualised VMs lockstep is measured on, every page fault
// costs a trip to the hypervisor: a recovery faulted in ~29,000 small pages
// of fresh heap (chunk buffers, decrypted chunks, records) and spent 13% of
// its CPU doing so, and scrypt's 256 MiB work area was most of its second.
// Go asks for no huge pages for its heap, and under the common setting
// "madvise" the kernel gives none unasked. Advise reserves a range of heap
// and advises it MADV_HUGEPAGE before anything is allocated there; the
// heap's allocations then fault in 2 MiB at a time (docs/design.md,
// "Where the time goes").
//
// Invariants:
//   - Advise is best effort: where huge pages are off (or Go's are, with
//     GODEBUG=disablethp=1), or the system refuses, it does nothing and
//     reports false; memory is then what it would have been.
//   - It costs no memory by itself: the range is never touched, and a page
//     of it counts towards the resident set only once the heap uses it.
//
// The package starts no goroutines.
package hugeheap

import "sync/atomic"

// Size is the heap range Advise prepares. The heap of a node or of a
// recovery stays well below it (scrypt's 256 MiB included); allocations
// beyond it get small pages, as without Advise.
const Size = 1 << 30

var advised atomic.Bool

// Advised reports whether Advise prepared the heap.
func Advised() bool { return advised.Load() }
