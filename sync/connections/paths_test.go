package connections

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// fakeResolver answers lookups from a map the test changes.
type fakeResolver struct {
	mu    sync.Mutex
	addrs map[crypt.DeviceID][]string
	calls atomic.Int32
}

func (r *fakeResolver) Lookup(_ context.Context, id crypt.DeviceID) []string {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.addrs[id]...)
}

func (r *fakeResolver) set(id crypt.DeviceID, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addrs == nil {
		r.addrs = map[crypt.DeviceID][]string{}
	}
	r.addrs[id] = addrs
}

// pipeRelay stands in for a relay server (tested in sync/relay): it hands
// one end of a loopback TCP connection straight to the target service's
// AcceptRelayed, so what is tested here is the service's side of relaying.
// (Not net.Pipe: its unbuffered writes would deadlock a TLS alert that
// nobody reads, which real sockets buffer.)
type pipeRelay struct {
	targets map[crypt.DeviceID]*Service
	dials   atomic.Int32
}

func (r *pipeRelay) DialRelay(_ context.Context, addr string, target crypt.DeviceID) (net.Conn, error) {
	r.dials.Add(1)
	s, ok := r.targets[target]
	if !ok {
		return nil, net.ErrClosed
	}
	near, far, err := tcpPair()
	if err != nil {
		return nil, err
	}
	s.AcceptRelayed(far, addr)
	return near, nil
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair() (net.Conn, net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	near, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	far, err := ln.Accept()
	if err != nil {
		near.Close()
		return nil, nil, err
	}
	return near, far, nil
}

func newPathService(t *testing.T, id *crypt.Identity, reg Registry, res Resolver, relay RelayDialer) *Service {
	t.Helper()
	s, err := New(context.Background(), Config{
		Identity: id, Registry: reg, Handler: holdHandler{},
		Listen: []string{"tcp://127.0.0.1:0"}, RefreshInterval: time.Hour,
		Resolver: res, Relay: relay,
		RelayHeadStart: 50 * time.Millisecond, RelayRetry: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitConn waits until s has a connection to id of the given type.
func waitConn(t *testing.T, s *Service, id crypt.DeviceID, kind string) Info {
	t.Helper()
	var found *Info
	defer func() {
		if found == nil { // the wait failed: show what there was
			t.Logf("connections: %+v", s.Connections())
		}
	}()
	testutil.Eventually(t, waitTimeout, fmt.Sprintf("a %s connection to %s", kind, id), func() bool {
		for _, c := range s.Connections() {
			if c.ID == id && c.Type == kind {
				found = &c
				return true
			}
		}
		return false
	})
	return *found
}

// deadAddress is a loopback address nothing listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "tcp://" + ln.Addr().String()
	ln.Close()
	return addr
}

// TestDynamicThroughRelayThenDirect: a dynamic device whose only working
// address is a relay gets a relayed connection; once discovery also knows
// a direct address, the direct connection replaces the relayed one on both
// sides.
func TestDynamicThroughRelayThenDirect(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b := identity(t, "a"), identity(t, "b")
	res := &fakeResolver{}
	relay := &pipeRelay{targets: map[crypt.DeviceID]*Service{}}
	ra := &memRegistry{peers: []Peer{{ID: b.ID, Addresses: []string{Dynamic}}}}
	// b knows no address for a at all: every connection is a's.
	rb := &memRegistry{peers: []Peer{{ID: a.ID, Addresses: []string{}}}}
	sa := newPathService(t, a, ra, res, relay)
	sb := newPathService(t, b, rb, nil, nil)
	relay.targets[b.ID] = sb
	res.set(b.ID, deadAddress(t), "relay://127.0.0.1:1/?id="+b.ID.String())

	defer serveAll(sa, sb)()

	ca := waitConn(t, sa, b.ID, TypeRelay)
	cb := waitConn(t, sb, a.ID, TypeRelay)
	if !ca.Dialed || cb.Dialed {
		t.Fatalf("relayed connection: a dialed %v, b dialed %v", ca.Dialed, cb.Dialed)
	}
	if ca.Addr != "relay://127.0.0.1:1/?id="+b.ID.String() {
		t.Fatalf("relayed connection's address = %q", ca.Addr)
	}

	res.set(b.ID, "relay://127.0.0.1:1/?id="+b.ID.String(), sb.Addresses()[0])
	waitConn(t, sa, b.ID, TypeLAN)
	waitConn(t, sb, a.ID, TypeLAN)
	dials := relay.dials.Load()
	// The direct connection stays: no more relay dials in a pause of 300 ms.
	time.Sleep(300 * time.Millisecond)
	if n := relay.dials.Load(); n != dials {
		t.Fatalf("relay dialed %d more times after a direct connection", n-dials)
	}
	if got := sa.Connections(); len(got) != 1 || got[0].Type != TypeLAN {
		t.Fatalf("a's connections: %+v", got)
	}
}

// TestDirectFirst: when a direct address works, the relay is never used.
func TestDirectFirst(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b := identity(t, "a"), identity(t, "b")
	res := &fakeResolver{}
	relay := &pipeRelay{targets: map[crypt.DeviceID]*Service{}}
	ra := &memRegistry{peers: []Peer{{ID: b.ID, Addresses: []string{Dynamic}}}}
	rb := &memRegistry{peers: []Peer{{ID: a.ID, Addresses: []string{}}}}
	sa, sb := newPathService(t, a, ra, res, relay), newPathService(t, b, rb, nil, nil)
	// Longer than any handshake: with the 50 ms of the other tests, a
	// direct handshake slowed by a loaded machine (-race) now and then
	// outlasted its head start, and the relay was dialed as it should be.
	sa.cfg.RelayHeadStart = time.Hour
	relay.targets[b.ID] = sb
	res.set(b.ID, "relay://127.0.0.1:1/?id="+b.ID.String(), sb.Addresses()[0])

	defer serveAll(sa, sb)()
	waitConn(t, sa, b.ID, TypeLAN)
	if n := relay.dials.Load(); n != 0 {
		t.Fatalf("relay dialed %d times although the direct address works", n)
	}
}

// TestRelayedUnknownIsPending: a device the node does not trust, arriving
// through a relay, is refused and recorded as pending like a direct one.
func TestRelayedUnknownIsPending(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b := identity(t, "a"), identity(t, "b")
	relay := &pipeRelay{targets: map[crypt.DeviceID]*Service{}}
	res := &fakeResolver{}
	ra := &memRegistry{peers: []Peer{{ID: b.ID, Addresses: []string{Dynamic}}}}
	rb := &memRegistry{}
	sa, sb := newPathService(t, a, ra, res, relay), newPathService(t, b, rb, nil, nil)
	relay.targets[b.ID] = sb
	res.set(b.ID, "relay://127.0.0.1:1/?id="+b.ID.String())

	defer serveAll(sa, sb)()
	testutil.Eventually(t, waitTimeout, "the relayed unknown device to be recorded as pending", func() bool { return pendingCount(rb) > 0 })
	if sb.Connected(a.ID) {
		t.Fatal("an unknown device got a relayed connection")
	}
}

// TestAcceptRelayedWhenStopped: a relayed connection offered to a service
// that is not serving is closed, not leaked.
func TestAcceptRelayedWhenStopped(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := newPathService(t, identity(t, "a"), &memRegistry{}, nil, nil)
	defer s.closeListeners()
	near, far, err := tcpPair()
	if err != nil {
		t.Fatal(err)
	}
	defer near.Close()
	s.AcceptRelayed(far, "relay://127.0.0.1:1/?id=x")
	near.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := near.Read(make([]byte, 1)); err == nil {
		t.Fatal("the relayed connection was not closed")
	}
}

func TestKeepOld(t *testing.T) {
	a, b := identity(t, "a"), identity(t, "b")
	s := &Service{cfg: Config{Identity: a}}
	direct := &Conn{ID: b.ID, Dialed: true}
	relayed := &Conn{ID: b.ID, Dialed: true, Relay: "relay://h:1/?id=x"}
	if !s.keepOld(direct, relayed) {
		t.Error("a relayed connection replaced a direct one")
	}
	if s.keepOld(relayed, direct) {
		t.Error("a direct connection did not replace a relayed one")
	}
	if s.keepOld(direct, &Conn{ID: b.ID, Dialed: true}) {
		t.Error("a newer connection in the same direction did not replace the older")
	}
}

func TestKind(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:5":     TypeLAN,
		"10.1.2.3:5":      TypeLAN,
		"192.168.1.9:5":   TypeLAN,
		"[fe80::1]:5":     TypeLAN,
		"[fd00::1]:5":     TypeLAN,
		"8.8.8.8:5":       TypeWAN,
		"[2001:db8::1]:5": TypeWAN,
		"garbage":         TypeWAN,
	} {
		if got := (&Conn{Addr: addr}).Kind(); got != want {
			t.Errorf("kind(%s) = %s, want %s", addr, got, want)
		}
	}
	if got := (&Conn{Addr: "8.8.8.8:5", Relay: "relay://h:1"}).Kind(); got != TypeRelay {
		t.Errorf("relayed kind = %s", got)
	}
}

// hangListener is a direct address whose dials hang: it completes TCP
// connections and never answers the TLS handshake, as a peer behind a
// firewall that drops SYNs leaves a dial hanging in connect. close stops
// it and closes what it accepted.
type hangListener struct {
	ln       net.Listener
	accepted atomic.Int32
	done     chan struct{}
}

func newHangListener(t *testing.T) *hangListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hangListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			h.accepted.Add(1)
		}
	}()
	return h
}

func (h *hangListener) addr() string { return "tcp://" + h.ln.Addr().String() }

func (h *hangListener) close() {
	h.ln.Close()
	<-h.done
}

// answersResolver answers a device's first lookup with first and every
// later one with later, as discovery does when a device announced its
// listen address first and its relay registration a moment after.
type answersResolver struct {
	first, later []string
	calls        atomic.Int32
}

func (r *answersResolver) Lookup(context.Context, crypt.DeviceID) []string {
	if r.calls.Add(1) == 1 {
		return append([]string(nil), r.first...)
	}
	return append([]string(nil), r.later...)
}

// watchedRelay is a pipeRelay that records what had happened when it was
// first dialed.
type watchedRelay struct {
	*pipeRelay
	at func() // called at every dial, before it is made
}

func (r watchedRelay) DialRelay(ctx context.Context, addr string, target crypt.DeviceID) (net.Conn, error) {
	r.at()
	return r.pipeRelay.DialRelay(ctx, addr, target)
}

// TestRelayWhileDirectHangs: a device whose direct address hangs (here its
// handshake would take an hour to time out) is reached through its relay
// once the direct dial has had its head start, with the direct dial still
// hanging: whether the relay address came with the first lookup or only
// with a later one (the device announced its relay registration after its
// listen address). The direct address is always dialed first.
func TestRelayWhileDirectHangs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		learned int32 // the lookup that first returns the relay
	}{
		{"relay known at once", 1},
		{"relay learned during the dial", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			a, b := identity(t, "a"), identity(t, "b")
			hang := newHangListener(t)
			defer hang.close()
			relayAddr := "relay://127.0.0.1:1/?id=" + b.ID.String()
			res := &answersResolver{first: []string{hang.addr()}, later: []string{hang.addr(), relayAddr}}
			if tc.learned == 1 {
				res.first = res.later
			}
			var directFirst, lookups atomic.Int32
			relay := watchedRelay{&pipeRelay{targets: map[crypt.DeviceID]*Service{}}, func() {
				directFirst.CompareAndSwap(0, hang.accepted.Load())
				lookups.CompareAndSwap(0, res.calls.Load())
			}}
			ra := &memRegistry{peers: []Peer{{ID: b.ID, Addresses: []string{Dynamic}}}}
			rb := &memRegistry{peers: []Peer{{ID: a.ID, Addresses: []string{}}}}
			sa := newPathService(t, a, ra, res, relay)
			sa.cfg.HandshakeTimeout = time.Hour // the direct dial ends only when cancelled
			sb := newPathService(t, b, rb, nil, nil)
			relay.targets[b.ID] = sb

			defer serveAll(sa, sb)()
			waitConn(t, sa, b.ID, TypeRelay)
			waitConn(t, sb, a.ID, TypeRelay)
			if n := directFirst.Load(); n == 0 {
				t.Error("the relay was dialed before the direct address")
			}
			if n := lookups.Load(); n < tc.learned {
				t.Errorf("the relay was dialed after %d lookups, but only lookup %d returned it", n, tc.learned)
			}
		})
	}
}
