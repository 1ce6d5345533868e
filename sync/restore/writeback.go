package restore

import "lockstep/sync/fsys"

// writeback starts the kernel's writeback of the ranges of one file as
// they are written (fsys.StartWriteback), from a goroutine of its own: the
// call waits when the disk's queue is full, and a writer must not.
type writeback struct {
	f      fsys.File
	ranges chan [2]int64
	done   chan struct{}
}

// startWriteback starts a writeback for f, which must stay open until
// stop has returned.
func startWriteback(f fsys.File) *writeback {
	wb := &writeback{f: f, ranges: make(chan [2]int64, writebackQueue), done: make(chan struct{})}
	go func() {
		defer close(wb.done)
		for r := range wb.ranges {
			fsys.StartWriteback(wb.f, r[0], int(r[1]))
		}
	}()
	return wb
}

// add queues n bytes at off. A full queue drops the range: the barrier
// flushes it anyway. A nil writeback does nothing.
func (wb *writeback) add(off int64, n int) {
	if wb == nil {
		return
	}
	select {
	case wb.ranges <- [2]int64{off, int64(n)}:
	default:
	}
}

// stop waits for the queued ranges to be handed over and ends the
// goroutine; add must not be called after it.
func (wb *writeback) stop() {
	if wb == nil {
		return
	}
	close(wb.ranges)
	<-wb.done
}
