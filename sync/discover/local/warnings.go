package local

import (
	"sync"
	"time"
)

// warnEvery is the least time between two Warn lines with the same text.
const warnEvery = time.Hour

// warnings decides which repeated errors deserve a Warn line: the first of
// each distinct text per warnEvery. Safe for concurrent use.
type warnings struct {
	mu   sync.Mutex
	last map[string]time.Time // error text → when it was last warned about
}

func newWarnings() *warnings { return &warnings{last: make(map[string]time.Time)} }

// warn reports whether text, seen at now, should be logged as a Warn (true)
// or only at Debug level (false). Texts not warned about for warnEvery are
// forgotten, so the map stays as small as the set of current errors.
func (w *warnings) warn(text string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, at := range w.last {
		if now.Sub(at) >= warnEvery {
			delete(w.last, t)
		}
	}
	if _, ok := w.last[text]; ok {
		return false
	}
	w.last[text] = now
	return true
}
