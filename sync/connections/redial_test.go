package connections

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// readHandler reads before it marks a connection ready, as the real
// handler's Hello does: in TLS 1.3 a dialer learns that the peer refused
// its certificate only at that first read, which then fails.
type readHandler struct{}

func (readHandler) ServeConn(ctx context.Context, c *Conn) error {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return err
	}
	c.MarkReady()
	<-ctx.Done()
	return ctx.Err()
}

// pendingCount is how many times r recorded a pending device.
func pendingCount(r *memRegistry) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// TestRejectedPeerBacksOff: a device that does not trust us ends each
// connection at once; redials back off exponentially (from rejectedFloor,
// here 10 ms) instead of following each other at the floor or, through a
// relay, with no wait at all. In 1 s that is about 7 dials (10, 30, 70,
// 150, 310, 630 ms ...); without the backoff it was dozens.
func TestRejectedPeerBacksOff(t *testing.T) {
	for _, path := range []string{"direct", "relay"} {
		t.Run(path, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			a, b := identity(t, "a"), identity(t, "b")
			res := &fakeResolver{}
			relay := &pipeRelay{targets: map[crypt.DeviceID]*Service{}}
			ra := &memRegistry{peers: []Peer{{ID: b.ID, Addresses: []string{Dynamic}}}}
			rb := &memRegistry{} // b trusts nobody
			sa := newPathService(t, a, ra, res, relay)
			sa.cfg.Handler = readHandler{}
			sa.rejectedFloor = 10 * time.Millisecond
			sb := newPathService(t, b, rb, nil, nil)
			sb.log = slog.New(slog.DiscardHandler) // a line per refused dial
			relay.targets[b.ID] = sb
			if path == "direct" {
				res.set(b.ID, sb.Addresses()[0])
			} else {
				res.set(b.ID, "relay://127.0.0.1:1/?id="+b.ID.String())
			}

			defer serveAll(sa, sb)()

			testutil.Eventually(t, waitTimeout, "b to see a dial from a", func() bool { return pendingCount(rb) > 0 })
			time.Sleep(time.Second) // the second whose redials are counted
			if n := pendingCount(rb); n > 12 {
				t.Fatalf("a dialed the device that refuses it %d times in a second", n)
			}
		})
	}
}

// TestHintsAreRateLimited: hints (discovery input anyone on the LAN can
// cause) bring the next dial of a device that can't be reached forward,
// but never closer than hintGap to the previous one.
func TestHintsAreRateLimited(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b := identity(t, "a"), identity(t, "b")
	res := &fakeResolver{}
	ra := &memRegistry{peers: []Peer{{ID: b.ID, Addresses: []string{Dynamic}}}}
	sa := newPathService(t, a, ra, res, nil)
	sa.hintGap = 200 * time.Millisecond
	res.set(b.ID, deadAddress(t))

	defer serveAll(sa)()

	testutil.Eventually(t, waitTimeout, "the first dial", func() bool { return res.calls.Load() > 0 })
	// Without hints the next dial would come after 1 s.
	for end := time.Now().Add(700 * time.Millisecond); time.Now().Before(end); {
		sa.Hint()
		time.Sleep(100 * time.Microsecond)
	}
	// 1 at the start, then one at most every 200 ms.
	if n := res.calls.Load(); n < 2 || n > 6 {
		t.Fatalf("%d dials during 700 ms of hints, want 2 to 6", n)
	}
}

// TestOtherDevicesDoNotCauseRedials: connections of other devices coming
// and going do not make a device that can't be reached be dialed again
// before its backoff has passed.
func TestOtherDevicesDoNotCauseRedials(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b := identity(t, "a"), identity(t, "b")
	res := &fakeResolver{}
	ra := &memRegistry{peers: []Peer{{ID: b.ID, Addresses: []string{Dynamic}}}}
	sa := newPathService(t, a, ra, res, nil)
	res.set(b.ID, deadAddress(t))

	defer serveAll(sa)()

	testutil.Eventually(t, waitTimeout, "the first dial", func() bool { return res.calls.Load() > 0 })
	// Within the first backoff (1 s), other devices connect and
	// disconnect many times.
	for end := time.Now().Add(700 * time.Millisecond); time.Now().Before(end); {
		sa.mu.Lock()
		sa.changedLocked()
		sa.mu.Unlock()
		time.Sleep(100 * time.Microsecond)
	}
	if n := res.calls.Load(); n != 1 {
		t.Fatalf("b dialed %d times within its first backoff, want 1", n)
	}
}
