package connections

import (
	"net/netip"
	"sync"
	"time"
)

// Limits on what unknown devices can make the service do. Device keys cost
// nothing to make, so any number of them may try to connect; each attempt
// costs a handshake, and recording one as pending a database write and an
// event.
const (
	// pendingBurst and pendingEvery: attempts by unknown devices from one
	// source (an IPv4 address or an IPv6 /64) are recorded as pending at
	// most pendingBurst at once, then one per pendingEvery. A device that
	// is not accepted yet tries again every 15 to 60 s; it stays listed.
	pendingBurst = 5
	pendingEvery = 10 * time.Second

	// allPendingBurst and allPendingEvery: the same over all sources
	// together, which bounds the database writes whatever the number of
	// sources: 10 a second.
	allPendingBurst = 20
	allPendingEvery = 100 * time.Millisecond

	// maxSources bounds the sources whose recent attempts are remembered;
	// beyond it the sources whose allowance is whole again are forgotten,
	// and if none is, all of them (the overall limit still holds).
	maxSources = 4096

	// maxHandshakesPerSource bounds the incoming handshakes one source may
	// have under way (each may last HandshakeTimeout); a connection beyond
	// it is closed unanswered. Relayed connections count against the
	// relay's address.
	maxHandshakesPerSource = 16

	// logEvery is the least time between two Info lines about unknown
	// devices, and between two Debug lines about failed handshakes; each
	// line counts the attempts since the previous one.
	logEvery = time.Minute
)

// bucket is a token bucket: up to burst tokens, one more every period.
type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date; zero: full
}

// refill brings b up to date at now and returns its tokens.
func (b *bucket) refill(now time.Time, burst int, every time.Duration) float64 {
	if b.at.IsZero() {
		b.tokens = float64(burst)
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(burst), b.tokens+float64(d)/float64(every))
	}
	b.at = now
	return b.tokens
}

// limits holds the per-source and overall allowances. Safe for concurrent
// use.
type limits struct {
	mu         sync.Mutex
	all        bucket
	sources    map[netip.Prefix]*bucket
	handshakes map[netip.Prefix]int

	unknown lineLimit // "unknown device tried to connect"
	failed  lineLimit // "incoming handshake failed"
}

func newLimits() *limits {
	return &limits{sources: map[netip.Prefix]*bucket{}, handshakes: map[netip.Prefix]int{}}
}

// enter counts a handshake from src as under way, or reports false when
// src has maxHandshakesPerSource already. Each true is paired with leave.
func (l *limits) enter(src netip.Prefix) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handshakes[src] >= maxHandshakesPerSource {
		return false
	}
	l.handshakes[src]++
	return true
}

// leave ends a handshake enter counted.
func (l *limits) leave(src netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handshakes[src]--; l.handshakes[src] <= 0 {
		delete(l.handshakes, src)
	}
}

// handshaking returns the handshakes from src under way.
func (l *limits) handshaking(src netip.Prefix) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handshakes[src]
}

// recordPending reports whether an unknown device's attempt from src, at
// now, may be recorded as pending, and if so takes it from the allowances.
func (l *limits) recordPending(src netip.Prefix, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.sources[src]
	if b == nil {
		if len(l.sources) >= maxSources {
			for p, old := range l.sources {
				if old.refill(now, pendingBurst, pendingEvery) >= pendingBurst {
					delete(l.sources, p)
				}
			}
			if len(l.sources) >= maxSources {
				clear(l.sources)
			}
		}
		b = &bucket{}
		l.sources[src] = b
	}
	if b.refill(now, pendingBurst, pendingEvery) < 1 || l.all.refill(now, allPendingBurst, allPendingEvery) < 1 {
		return false
	}
	b.tokens--
	l.all.tokens--
	return true
}

// lineLimit lets through one log line per logEvery and counts the events
// in between. Its methods are called with limits.mu held.
type lineLimit struct {
	last    time.Time
	skipped int // events not logged since the last line
	refused int // of those, the ones the limits kept from being acted on
}

// skip counts an event that is not to be logged.
func (l *lineLimit) skip(refused bool) {
	l.skipped++
	if refused {
		l.refused++
	}
}

// allow reports whether to log an event at now, counting it as skipped if
// not. When it does, it returns the events skipped since the previous
// line and how many of them were refused.
func (l *lineLimit) allow(now time.Time) (ok bool, skipped, refused int) {
	if !l.last.IsZero() && now.Sub(l.last) < logEvery {
		l.skipped++
		return false, 0, 0
	}
	skipped, refused = l.skipped, l.refused
	l.last, l.skipped, l.refused = now, 0, 0
	return true, skipped, refused
}

// logUnknown reports whether to log an unknown device's attempt at now,
// with the attempts since the previous line and how many of them were not
// recorded. Only a recorded attempt is logged.
func (l *limits) logUnknown(now time.Time, recorded bool) (ok bool, skipped, unrecorded int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !recorded {
		l.unknown.skip(true)
		return false, 0, 0
	}
	return l.unknown.allow(now)
}

// logFailed reports whether to log a failed incoming handshake at now,
// with the failures since the previous line and how many of them were
// connections closed unanswered (refused true: this one was).
func (l *limits) logFailed(now time.Time, refused bool) (ok bool, skipped, closed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if refused {
		l.failed.skip(true)
		return false, 0, 0
	}
	return l.failed.allow(now)
}
