package relay

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// freshIdentity makes a device key and certificate in memory: what anyone
// can make by the thousand.
func freshIdentity(t testing.TB) *crypt.Identity {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &crypt.Identity{
		Certificate: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf},
		Leaf:        leaf,
		ID:          crypt.DeviceIDFromCert(leaf),
	}
}

// protocolFrom opens a protocol connection to s as id from the loopback
// address src; the test's end closes it.
func protocolFrom(t *testing.T, s *testServer, id *crypt.Identity, src string) *tls.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: waitTimeout}
	raw, err := d.Dial("tcp", s.hostport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	cfg := crypt.ClientTLSConfig(id, s.id.ID)
	cfg.NextProtos = []string{ALPN}
	tc := tls.Client(raw, cfg)
	raw.SetDeadline(time.Now().Add(waitTimeout))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc
}

// joinFrom registers id from src and returns the relay's answer; the
// registration lasts until the test ends (or the relay drops it).
func joinFrom(t *testing.T, s *testServer, id *crypt.Identity, src string) (*tls.Conn, Response_Code) {
	t.Helper()
	tc := protocolFrom(t, s, id, src)
	if err := writeMessage(tc, joinMessage()); err != nil {
		t.Fatal(err)
	}
	m, err := readMessage(tc)
	if err != nil || m.GetResponse() == nil {
		t.Fatalf("join answered %v, %v", m, err)
	}
	tc.NetConn().SetDeadline(time.Time{})
	return tc, m.GetResponse().GetCode()
}

// connectFrom asks for a session with target as id from src: OK with the
// key, or the refusal's code.
func connectFrom(t *testing.T, s *testServer, id *crypt.Identity, src string, target crypt.DeviceID) (Response_Code, [keySize]byte) {
	t.Helper()
	tc := protocolFrom(t, s, id, src)
	defer tc.Close()
	if err := writeMessage(tc, connectMessage(target)); err != nil {
		t.Fatal(err)
	}
	m, err := readMessage(tc)
	if err != nil {
		t.Fatalf("connect answered %v", err)
	}
	if inv := m.GetInvitation(); inv != nil {
		return Response_OK, [keySize]byte(inv.Key)
	}
	return m.GetResponse().GetCode(), [keySize]byte{}
}

// closed reports whether the relay closed c (within waitTimeout).
func closed(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(waitTimeout))
	for {
		if _, err := c.Read(make([]byte, 1024)); err != nil {
			return !isTimeout(err)
		}
	}
}

// TestRegistrationsPerSource: one address holds at most its share of
// registrations; its devices may register again, and other addresses
// register as usual.
func TestRegistrationsPerSource(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) { s.maxRegsPerSource = 2 })
	for _, name := range []string{"a", "b"} {
		if _, code := joinFrom(t, srv, identity(t, name), "127.0.0.1"); code != Response_OK {
			t.Fatalf("%s: %v", name, code)
		}
	}
	if _, code := joinFrom(t, srv, identity(t, "c"), "127.0.0.1"); code != Response_UNAVAILABLE {
		t.Fatalf("a third device of one address: %v, want UNAVAILABLE", code)
	}
	if _, code := joinFrom(t, srv, identity(t, "a"), "127.0.0.1"); code != Response_OK {
		t.Fatalf("a registering again: %v", code)
	}
	if _, code := joinFrom(t, srv, identity(t, "c"), "127.0.0.2"); code != Response_OK {
		t.Fatalf("a device of another address: %v", code)
	}
	if got := srv.Stats().Registered; got != 3 {
		t.Fatalf("%d registered, want 3", got)
	}
}

// TestOneSourceCannotFillRegistrations: with the defaults, one address
// registering fresh device after fresh device gets its share, and others
// still register.
func TestOneSourceCannotFillRegistrations(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) { s.maxRegs = 2 * DefaultMaxRegistrationsPerSource })
	ok := 0
	for range 2*DefaultMaxRegistrationsPerSource + 1 {
		if _, code := joinFrom(t, srv, freshIdentity(t), "127.0.0.1"); code == Response_OK {
			ok++
		}
	}
	if ok != DefaultMaxRegistrationsPerSource {
		t.Fatalf("%d of one address's devices registered, want %d", ok, DefaultMaxRegistrationsPerSource)
	}
	if _, code := joinFrom(t, srv, identity(t, "other"), "127.0.0.2"); code != Response_OK {
		t.Fatalf("a device of another address: %v", code)
	}
}

// TestFullRelayEvictsHeaviestRegistration: when the relay is full, a new
// device takes the place of the oldest registration of the address holding
// the most (whose connection is closed), as long as that address holds more
// than the newcomer's would.
func TestFullRelayEvictsHeaviestRegistration(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) { s.maxRegs = 4; s.maxRegsPerSource = 3 })
	var heavy []*tls.Conn
	for _, name := range []string{"a0", "a1", "a2"} {
		tc, code := joinFrom(t, srv, identity(t, name), "127.0.0.1")
		if code != Response_OK {
			t.Fatalf("%s: %v", name, code)
		}
		heavy = append(heavy, tc)
	}
	if _, code := joinFrom(t, srv, identity(t, "b0"), "127.0.0.2"); code != Response_OK {
		t.Fatalf("b0: %v", code)
	}
	if _, code := joinFrom(t, srv, identity(t, "c0"), "127.0.0.3"); code != Response_OK {
		t.Fatalf("a newcomer when full: %v, want OK", code)
	}
	if !closed(heavy[0]) {
		t.Fatal("the heaviest address's oldest registration was not dropped")
	}
	testutil.Eventually(t, waitTimeout, "4 registrations", func() bool { return srv.Stats().Registered == 4 })
	// 2, 1, 1: nobody holds more than a newcomer of 127.0.0.3 would.
	if _, code := joinFrom(t, srv, identity(t, "c1"), "127.0.0.3"); code != Response_UNAVAILABLE {
		t.Fatalf("a newcomer when full and fair: %v, want UNAVAILABLE", code)
	}
	// The dropped device registers again, from its own address: refused
	// too (its address holds 2, a newcomer of it would make 3).
	if _, code := joinFrom(t, srv, identity(t, "a0"), "127.0.0.1"); code != Response_UNAVAILABLE {
		t.Fatalf("the dropped device again: %v, want UNAVAILABLE", code)
	}
	if srv.Stats().Registered != 4 {
		t.Fatalf("%d registered, want 4", srv.Stats().Registered)
	}
}

// TestSessionsPerSource: the sessions one address asks for are capped;
// other addresses still get theirs.
func TestSessionsPerSource(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) { s.maxSessionsPerSource = 3 })
	b := identity(t, "b")
	joinFrom(t, srv, b, "127.0.0.2")
	for i := range 3 {
		if code, _ := connectFrom(t, srv, freshIdentity(t), "127.0.0.1", b.ID); code != Response_OK {
			t.Fatalf("session %d of one address: %v", i+1, code)
		}
	}
	if code, _ := connectFrom(t, srv, freshIdentity(t), "127.0.0.1", b.ID); code != Response_TOO_MANY_SESSIONS {
		t.Fatalf("session 4 of one address: %v, want TOO_MANY_SESSIONS", code)
	}
	if code, _ := connectFrom(t, srv, freshIdentity(t), "127.0.0.3", b.ID); code != Response_OK {
		t.Fatalf("a session of another address: %v", code)
	}
}

// TestOneSourceCannotFillSessions: with the defaults, one address asking
// for sessions with fresh device after fresh device (to targets of its
// own) gets its share of the relay's places, and others still get theirs.
func TestOneSourceCannotFillSessions(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 2*DefaultMaxSessionsPerSource, nil)
	var targets []*crypt.Identity
	for range 2*DefaultMaxSessionsPerSource/MaxSessionsPerDevice + 2 {
		id := freshIdentity(t)
		joinFrom(t, srv, id, "127.0.0.5")
		targets = append(targets, id)
	}
	ok := 0
	for i := range 2*DefaultMaxSessionsPerSource + 1 {
		if code, _ := connectFrom(t, srv, freshIdentity(t), "127.0.0.1", targets[i/MaxSessionsPerDevice].ID); code == Response_OK {
			ok++
		}
	}
	if ok != DefaultMaxSessionsPerSource {
		t.Fatalf("%d sessions for one address, want %d", ok, DefaultMaxSessionsPerSource)
	}
	b := identity(t, "b")
	joinFrom(t, srv, b, "127.0.0.2")
	if code, _ := connectFrom(t, srv, identity(t, "a"), "127.0.0.3", b.ID); code != Response_OK {
		t.Fatalf("a session of another address: %v", code)
	}
}

// TestFullSessionsEvictHeaviestSource: when the relay's sessions are full,
// a newcomer's session takes the place of the oldest session of the
// address holding the most — a spliced one is cut, a pending one's key no
// longer works — as long as that address holds more than the newcomer's
// would; otherwise it is refused.
func TestFullSessionsEvictHeaviestSource(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 4, func(s *Server) { s.maxSessionsPerSource = 3 })
	b := identity(t, "b")
	far := make(chan net.Conn, 4)
	startClient(t, b, srv.URL(), func(conn net.Conn, _ crypt.DeviceID) { far <- conn }, nil)

	// 127.0.0.1 (Dial's address): a spliced session, then two pending.
	spliced, err := Dial(context.Background(), identity(t, "a"), srv.URL(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer spliced.Close()
	farEnd := <-far
	defer farEnd.Close()
	var keys [][keySize]byte
	for range 2 {
		code, key := connectFrom(t, srv, freshIdentity(t), "127.0.0.1", b.ID)
		if code != Response_OK {
			t.Fatalf("pending session: %v", code)
		}
		keys = append(keys, key)
	}
	if code, _ := connectFrom(t, srv, freshIdentity(t), "127.0.0.2", b.ID); code != Response_OK {
		t.Fatalf("the other address's session: %v", code)
	}
	// 3, 1: a newcomer of 127.0.0.3 cuts the spliced session, the oldest.
	if code, _ := connectFrom(t, srv, freshIdentity(t), "127.0.0.3", b.ID); code != Response_OK {
		t.Fatalf("a newcomer when full: %v, want OK", code)
	}
	if !closed(spliced) || !closed(farEnd) {
		t.Fatal("the spliced session that made room is still open")
	}
	// 2, 1, 1: the next newcomer of a new address takes the oldest pending
	// session's place; that key no longer joins.
	if code, _ := connectFrom(t, srv, freshIdentity(t), "127.0.0.4", b.ID); code != Response_OK {
		t.Fatalf("a second newcomer when full: %v, want OK", code)
	}
	if _, err := joinSession(context.Background(), srv.hostport, keys[0]); !errors.Is(err, ErrRefused) {
		t.Fatalf("joining the evicted pending session: %v, want ErrRefused", err)
	}
	// 1, 1, 1, 1: fair; a newcomer is refused.
	if code, _ := connectFrom(t, srv, freshIdentity(t), "127.0.0.5", b.ID); code != Response_TOO_MANY_SESSIONS {
		t.Fatalf("a newcomer when full and fair: %v, want TOO_MANY_SESSIONS", code)
	}
}
