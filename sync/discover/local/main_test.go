package local

import (
	"context"
	"crypto/rand"
	"net"
	"net/netip"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// waitTimeout bounds every wait for a datagram or a state in these tests.
const waitTimeout = 5 * time.Second

// randomID returns a random device ID.
func randomID(t testing.TB) crypt.DeviceID {
	t.Helper()
	var id crypt.DeviceID
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	return id
}

// identityID returns the device ID of a fresh identity.
func identityID(t testing.TB, name string) crypt.DeviceID {
	t.Helper()
	id, _, err := crypt.LoadOrCreateIdentity(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return id.ID
}

// freePort returns a UDP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// fixed returns an Addresses func that always returns addrs.
func fixed(addrs ...string) func() []string {
	return func() []string { return addrs }
}

// start runs s.Serve until the test ends and checks it returned nil.
func start(t testing.TB, s *Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
}

// mustNew is New that fails the test on error.
func mustNew(t testing.TB, cfg Config) *Service {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// peer is a bare UDP socket on 127.0.0.1 standing in for another device.
type peer struct {
	t    testing.TB
	conn *net.UDPConn
}

func newPeer(t testing.TB) *peer {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{t: t, conn: c}
}

// target is the peer's address as a Config target.
func (p *peer) target() string { return p.conn.LocalAddr().String() }

// sendRaw sends b to addr.
func (p *peer) sendRaw(addr net.Addr, b []byte) {
	p.t.Helper()
	if _, err := p.conn.WriteTo(b, addr); err != nil {
		p.t.Fatal(err)
	}
}

// send sends a to addr.
func (p *peer) send(addr net.Addr, a Announcement) {
	p.t.Helper()
	b, err := a.MarshalBinary()
	if err != nil {
		p.t.Fatal(err)
	}
	p.sendRaw(addr, b)
}

// recv returns the next announcement received within d, or false.
func (p *peer) recv(d time.Duration) (Announcement, bool) {
	p.t.Helper()
	buf := make([]byte, 2*MaxPacketSize)
	if err := p.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		p.t.Fatal(err)
	}
	n, err := p.conn.Read(buf)
	if err != nil {
		return Announcement{}, false
	}
	a, err := ParseAnnouncement(buf[:n])
	if err != nil {
		p.t.Fatalf("received a malformed announcement: %v", err)
	}
	return a, true
}

var loopback = netip.MustParseAddr("127.0.0.1")
