package global

import (
	"errors"
	"math"
	"net/netip"
	"strings"
	"sync"
	"time"

	"lockstep/crypt"
)

var (
	// errFull: the registry holds its maximum of live devices, a new one
	// announced, and no source holds more than the newcomer's would. The
	// server answers 503.
	errFull = errors.New("discovery server is full")
	// errSourceFull: the source of a new device holds its maximum of
	// live devices. The server answers 429.
	errSourceFull = errors.New("too many devices announced from this address")
)

// registry is the server's table of announcements. Entries are small (the
// addresses joined into one string, a time and a source) and expire TTL
// after they were written: lazily on lookup, in bulk on sweep, and when
// the table or a source is full and a new device arrives.
//
// Device certificates cost nothing to make, so what one source (an IPv4
// address or an IPv6 /64) can hold is bounded: at most perSource devices,
// and when the table is full a newcomer takes the place of the oldest
// device of the source holding the most, if that source holds more than
// the newcomer's would; else it is refused. So no source can keep others
// out, and sources that each hold few keep their places.
//
// It is safe for concurrent use.
type registry struct {
	ttl       int64 // nanoseconds
	max       int
	perSource int

	mu        sync.Mutex
	entries   map[crypt.DeviceID]entry
	sources   map[netip.Prefix]map[crypt.DeviceID]struct{} // the devices each source announced
	lastSweep int64                                        // unix nanoseconds of the last sweep forced by a full table
}

// entry is one device's announcement.
type entry struct {
	addrs string       // addresses joined by '\n' (which no valid address holds)
	seen  int64        // unix nanoseconds of the announcement
	src   netip.Prefix // where it came from
}

func newRegistry(ttl time.Duration, max, perSource int) *registry {
	return &registry{
		ttl: int64(ttl), max: max, perSource: perSource,
		entries: make(map[crypt.DeviceID]entry),
		sources: make(map[netip.Prefix]map[crypt.DeviceID]struct{}),
	}
}

func (e entry) live(now, ttl int64) bool { return now-e.seen < ttl }

// put replaces id's addresses, announced from src; an empty list forgets
// id. A device new to the table, or announcing from another source, is
// admitted under the limits of the type comment: errSourceFull or errFull
// when it is not, and then its old entry stays as it was. It reports the
// device whose entry made room, if one did.
func (r *registry) put(id crypt.DeviceID, addrs []string, src netip.Prefix, now time.Time) (evicted crypt.DeviceID, err error) {
	n := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	old, known := r.entries[id]
	if known && !old.live(n, r.ttl) {
		r.dropLocked(id)
		known = false
	}
	if len(addrs) == 0 {
		if known {
			r.dropLocked(id)
		}
		return evicted, nil
	}
	if !known || old.src != src {
		if evicted, err = r.admitLocked(src, !known, n); err != nil {
			return evicted, err
		}
		if known {
			r.dropLocked(id)
		}
		set := r.sources[src]
		if set == nil {
			set = make(map[crypt.DeviceID]struct{})
			r.sources[src] = set
		}
		set[id] = struct{}{}
	}
	r.entries[id] = entry{addrs: strings.Join(addrs, "\n"), seen: n, src: src}
	return evicted, nil
}

// admitLocked makes room for one more device of src (adds: one more in
// the table too), or says why there is none.
func (r *registry) admitLocked(src netip.Prefix, adds bool, n int64) (evicted crypt.DeviceID, err error) {
	if len(r.sources[src]) >= r.perSource {
		for id := range r.sources[src] {
			if !r.entries[id].live(n, r.ttl) {
				r.dropLocked(id)
			}
		}
		if len(r.sources[src]) >= r.perSource {
			return evicted, errSourceFull
		}
	}
	if !adds || len(r.entries) < r.max {
		return evicted, nil
	}
	// A full sweep is O(n); do it at most once a second so a flood of new
	// devices against a full table stays cheap.
	if n-r.lastSweep >= int64(time.Second) || n < r.lastSweep {
		r.lastSweep = n
		r.sweepLocked(n)
	}
	if len(r.entries) < r.max {
		return evicted, nil
	}
	victim, ok := r.victimLocked(len(r.sources[src]))
	if !ok {
		return evicted, errFull
	}
	r.dropLocked(victim)
	return victim, nil
}

// victimLocked picks the device to make room for a newcomer whose source
// holds mine: the oldest of the sources holding the most, if they hold
// more than mine+1.
func (r *registry) victimLocked(mine int) (crypt.DeviceID, bool) {
	most := 0
	for _, set := range r.sources {
		most = max(most, len(set))
	}
	if most <= mine+1 {
		return crypt.DeviceID{}, false
	}
	var victim crypt.DeviceID
	oldest := int64(math.MaxInt64)
	for _, set := range r.sources {
		if len(set) != most {
			continue
		}
		for id := range set {
			if e := r.entries[id]; e.seen < oldest {
				victim, oldest = id, e.seen
			}
		}
	}
	return victim, true
}

// dropLocked forgets id's entry.
func (r *registry) dropLocked(id crypt.DeviceID) {
	e, ok := r.entries[id]
	if !ok {
		return
	}
	delete(r.entries, id)
	if set := r.sources[e.src]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(r.sources, e.src)
		}
	}
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
		r.dropLocked(id)
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
			r.dropLocked(id)
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
