package testutil

import (
	"bytes"
	"sync"
)

// LockedBuffer collects what is written to it, such as a process's stdout
// and stderr or a logger's output, while a test reads it. The zero value is
// empty and ready to use.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
