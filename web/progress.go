package web

import (
	"sync"
	"time"
)

// progress measures how fast the transfers the console shows go: for
// each (a folder's pull, its restore) the bytes done at the first look
// and at the last, so the rate is the average since the transfer began
// as the node has seen it, and the time left is what remains at that
// rate. A transfer whose total changes or whose done bytes go back
// started anew. The zero value is ready to use.
type progress struct {
	mu   sync.Mutex
	seen map[string]*transfer
	now  func() time.Time
}

type transfer struct {
	total int64
	// first and last: when, and how many bytes were done.
	firstAt, lastAt     time.Time
	firstDone, lastDone int64
}

// minRateWindow is how long a transfer must have been watched before a
// rate is given: two looks a moment apart say little.
const minRateWindow = time.Second

// observe records that key has done bytes of total and returns the
// bytes per second so far and the time left, both 0 while unknown.
func (p *progress) observe(key string, done, total int64) (rate float64, left time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.now != nil {
		now = p.now()
	}
	if p.seen == nil {
		p.seen = map[string]*transfer{}
	}
	t := p.seen[key]
	if t == nil || t.total != total || done < t.lastDone {
		t = &transfer{total: total, firstAt: now, firstDone: done}
		p.seen[key] = t
	}
	t.lastAt, t.lastDone = now, done
	span := t.lastAt.Sub(t.firstAt)
	if span < minRateWindow || t.lastDone <= t.firstDone {
		return 0, 0
	}
	rate = float64(t.lastDone-t.firstDone) / span.Seconds()
	left = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
	return rate, left
}

// forget drops the transfers whose keys are not in live: they ended.
func (p *progress) forget(live map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.seen {
		if !live[k] {
			delete(p.seen, k)
		}
	}
}
