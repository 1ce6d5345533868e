package restore

import (
	"os"

	"lockstep/sync/fsys"
)

// writeback starts the kernel's writeback of the ranges of one file as
// they are written (fsys.StartWriteback), from a goroutine of its own: the
// call waits when the disk's queue is full, and a writer must not.
//
// It also drops what is on disk from the page cache, dropBehind behind
// the part of the file written from its start (fsys.DropWritten): a
// recovery's files are not read again soon, and a recovery of a large
// folder would otherwise fill the page cache with them and push out what
// the machine had cached. On the dev VM it paid even for 1 GiB: pages new
// to the page cache cost there far more than reused ones (the kernel's
// copy into them was 40% of a recovery's CPU), and the pages dropped are
// the next ones written into.
type writeback struct {
	f      fsys.File
	ranges chan [2]int64
	done   chan struct{}

	written contiguous
	dropped int64 // bytes from the start dropped from the cache
}

// dropBehind is how far behind the written part of a file the cache is
// dropped: far enough that the writeback of what is dropped is done, and
// waiting for it does not hold up the ranges queued behind.
const dropBehind = 32 << 20

var pageSize = int64(os.Getpagesize())

// startWriteback starts a writeback for f, which must stay open until
// stop has returned.
func startWriteback(f fsys.File) *writeback {
	wb := &writeback{f: f, ranges: make(chan [2]int64, writebackQueue), done: make(chan struct{})}
	go func() {
		defer close(wb.done)
		for r := range wb.ranges {
			fsys.StartWriteback(wb.f, r[0], int(r[1]))
			// Whole pages only, written in full: the end of the part
			// written may be inside a page another block completes.
			end := (wb.written.add(r[0], r[1]) - dropBehind) / pageSize * pageSize
			if end-wb.dropped >= dropBehind {
				fsys.DropWritten(wb.f, wb.dropped, end-wb.dropped)
				wb.dropped = end
			}
		}
	}()
	return wb
}

// add queues n bytes at off. A full queue drops the range: the barrier
// flushes it anyway (and the file's cache is dropped no further). A nil
// writeback does nothing.
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

// contiguous tracks how much of a file is written from its start, given
// the written ranges in any order (blocks are fetched in parallel).
type contiguous struct {
	end   int64           // bytes from the start written
	ahead map[int64]int64 // ranges past a gap: length by offset
}

// add notes n bytes written at off and returns the new end.
func (c *contiguous) add(off, n int64) int64 {
	if off != c.end {
		if off > c.end {
			if c.ahead == nil {
				c.ahead = map[int64]int64{}
			}
			c.ahead[off] = n
		}
		return c.end
	}
	c.end += n
	for {
		m, ok := c.ahead[c.end]
		if !ok {
			return c.end
		}
		delete(c.ahead, c.end)
		c.end += m
	}
}
