package relay

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// Per-source limits. Device certificates cost nothing to make, so the
// relay also bounds what one source (an IPv4 address or an IPv6 /64) may
// hold, and when it is full, a newcomer takes the place of the oldest
// registration or session of the source holding the most, as long as that
// source holds more than the newcomer's would; else it is refused. So no
// source can keep others out, and sources that each hold few keep theirs.
const (
	// DefaultMaxRegistrationsPerSource caps the devices registered from
	// one source (a household's NAT may hold a hundred); filling the
	// default 10,000 places takes a hundred sources.
	DefaultMaxRegistrationsPerSource = 100
	// DefaultMaxSessionsPerSource caps the sessions, pending and spliced,
	// asked for from one source; filling the default 1,000 takes ten.
	DefaultMaxSessionsPerSource = 100

	// maxJoining caps the sessions a Client joins at once (each waits up
	// to 40 s for its partner): as many as a relay lets one device have,
	// so an honest relay's invitations are never dropped.
	maxJoining = MaxSessionsPerDevice

	// logEvery is the least time between two lines about registrations or
	// sessions refused or dropped by these limits.
	logEvery = time.Minute
)

// heaviest returns the largest count, if it is more than mine+1: the
// sources to take a place from for a newcomer whose source holds mine.
func heaviest(counts map[netip.Prefix]int, mine int) (most int, ok bool) {
	for _, n := range counts {
		most = max(most, n)
	}
	return most, most > mine+1
}

// regVictimLocked picks the registration to drop for a newcomer whose
// source holds mine, or nil. s.mu is held.
func (s *Server) regVictimLocked(mine int) *registration {
	most, ok := heaviest(s.regsPerSource, mine)
	if !ok {
		return nil
	}
	var victim *registration
	for _, r := range s.regs {
		if s.regsPerSource[r.src] == most && (victim == nil || r.since.Before(victim.since)) {
			victim = r
		}
	}
	return victim
}

// sessionVictimLocked picks the session to end for a newcomer whose source
// holds mine, or nil. s.mu is held.
func (s *Server) sessionVictimLocked(mine int) *session {
	most, ok := heaviest(s.sessionsPerSource, mine)
	if !ok {
		return nil
	}
	var victim *session
	oldest := time.Unix(0, math.MaxInt64)
	consider := func(p *session) {
		if s.sessionsPerSource[p.src] == most && p.created.Before(oldest) {
			victim, oldest = p, p.created
		}
	}
	for _, p := range s.sessions {
		consider(p)
	}
	for p := range s.live {
		consider(p)
	}
	return victim
}

// limitLog lets through one line per logEvery about the limits, counting
// what happened in between. Safe for concurrent use.
type limitLog struct {
	mu      sync.Mutex
	last    time.Time
	refused int
	dropped int
}

// note counts a refusal or a drop at now and reports whether to log, with
// the counts since the previous line.
func (l *limitLog) note(now time.Time, dropped bool) (ok bool, refusedN, droppedN int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if dropped {
		l.dropped++
	} else {
		l.refused++
	}
	if !l.last.IsZero() && now.Sub(l.last) < logEvery {
		return false, 0, 0
	}
	refusedN, droppedN = l.refused, l.dropped
	l.last, l.refused, l.dropped = now, 0, 0
	return true, refusedN, droppedN
}
