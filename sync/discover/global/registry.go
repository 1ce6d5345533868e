package global

import (
	"errors"
	"strings"
	"sync"
	"time"

	"lockstep/crypt"
)

// errFull: the registry holds its maximum of live devices and a new one
// announced. The server answers 503.
var errFull = errors.New("discovery server is full")

// registry is the server's table of announcements. Entries are small (the
// addresses joined into one string and a time) and expire TTL after they
// were written: lazily on lookup, in bulk on sweep, and when the table is
// full and a new device arrives. It is safe for concurrent use.
type registry struct {
	ttl int64 // nanoseconds
	max int

	mu        sync.Mutex
	entries   map[crypt.DeviceID]entry
	lastSweep int64 // unix nanoseconds of the last sweep forced by a full table
}

// entry is one device's announcement.
type entry struct {
	addrs string // addresses joined by '\n' (which no valid address holds)
	seen  int64  // unix nanoseconds of the announcement
}

func newRegistry(ttl time.Duration, max int) *registry {
	return &registry{ttl: int64(ttl), max: max, entries: make(map[crypt.DeviceID]entry)}
}

func (e entry) live(now, ttl int64) bool { return now-e.seen < ttl }

// put replaces id's addresses; an empty list forgets id. It returns errFull
// when id has no live entry and max live devices are held already.
func (r *registry) put(id crypt.DeviceID, addrs []string, now time.Time) error {
	n := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(addrs) == 0 {
		delete(r.entries, id)
		return nil
	}
	if _, ok := r.entries[id]; !ok && len(r.entries) >= r.max {
		// A full sweep is O(n); do it at most once a second so a flood of
		// new devices against a full table stays cheap.
		if n-r.lastSweep >= int64(time.Second) || n < r.lastSweep {
			r.lastSweep = n
			r.sweepLocked(n)
		}
		if len(r.entries) >= r.max {
			return errFull
		}
	}
	r.entries[id] = entry{addrs: strings.Join(addrs, "\n"), seen: n}
	return nil
}

// get returns id's addresses and announcement time if it has a live entry.
func (r *registry) get(id crypt.DeviceID, now time.Time) (addrs []string, seen time.Time, ok bool) {
	n := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		return nil, time.Time{}, false
	}
	if !e.live(n, r.ttl) {
		delete(r.entries, id)
		return nil, time.Time{}, false
	}
	return strings.Split(e.addrs, "\n"), time.Unix(0, e.seen), true
}

// sweep drops expired entries.
func (r *registry) sweep(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked(now.UnixNano())
}

func (r *registry) sweepLocked(n int64) {
	for id, e := range r.entries {
		if !e.live(n, r.ttl) {
			delete(r.entries, id)
		}
	}
}

// live counts live entries.
func (r *registry) live(now time.Time) int {
	n := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	count := 0
	for _, e := range r.entries {
		if e.live(n, r.ttl) {
			count++
		}
	}
	return count
}
