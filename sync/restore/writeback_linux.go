package restore

import "golang.org/x/sys/unix"

// writeback starts the kernel's writeback of the ranges of one file as
// they are written, from a goroutine of its own: sync_file_range waits
// when the disk's queue is full, and a writer must not.
type writeback struct {
	ranges chan [2]int64
	done   chan struct{}
}

// startWriteback returns a writeback for f, or nil (which does nothing)
// where f has no descriptor to share. It works on a duplicate of f's
// descriptor, so f may be closed once stop has returned.
func startWriteback(f any) *writeback {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok {
		return nil
	}
	d, err := unix.Dup(int(fd.Fd()))
	if err != nil {
		return nil
	}
	wb := &writeback{ranges: make(chan [2]int64, writebackQueue), done: make(chan struct{})}
	go func() {
		defer close(wb.done)
		defer unix.Close(d)
		for r := range wb.ranges {
			_ = unix.SyncFileRange(d, r[0], r[1], unix.SYNC_FILE_RANGE_WRITE)
		}
	}()
	return wb
}

// add queues n bytes at off. A full queue drops the range: the barrier
// flushes it anyway.
func (wb *writeback) add(off int64, n int) {
	if wb == nil {
		return
	}
	select {
	case wb.ranges <- [2]int64{off, int64(n)}:
	default:
	}
}

// stop hands the queued ranges over and releases the descriptor; add must
// not be called after it.
func (wb *writeback) stop() {
	if wb == nil {
		return
	}
	close(wb.ranges)
	<-wb.done
}
