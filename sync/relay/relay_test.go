package relay

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// TestEndToEndTLS: B registers, A dials B through the relay, and the two run
// their own TLS handshake over the spliced connection; 1 MiB crosses each
// way intact.
func TestEndToEndTLS(t *testing.T) {
	relayID, a, b := identity(t, "relay"), identity(t, "a"), identity(t, "b")
	srv := startServer(t, relayID, "127.0.0.1:0", 0, nil)
	fromA, fromB := randomBytes(t, 1<<20), randomBytes(t, 1<<20)

	type result struct {
		from crypt.DeviceID
		got  []byte
		err  error
	}
	results := make(chan result, 1)
	startClient(t, b, srv.URL(), func(conn net.Conn, from crypt.DeviceID) {
		defer conn.Close()
		tc := tls.Server(conn, crypt.ServerTLSConfig(b, func(d crypt.DeviceID) bool { return d == a.ID }))
		got, err := exchange(tc, fromB, len(fromA))
		results <- result{from, got, err}
	}, nil)

	conn, err := Dial(context.Background(), a, srv.URL(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(conn, crypt.ClientTLSConfig(a, b.ID))
	got, err := exchange(tc, fromA, len(fromB))
	conn.Close()
	if err != nil {
		t.Fatal("A:", err)
	}
	if !bytes.Equal(got, fromB) {
		t.Fatal("A received other bytes than B sent")
	}
	r := <-results
	if r.err != nil {
		t.Fatal("B:", r.err)
	}
	if !bytes.Equal(r.got, fromA) {
		t.Fatal("B received other bytes than A sent")
	}
	if r.from != a.ID {
		t.Fatalf("Accept got from = %s, want A %s", r.from.Short(), a.ID.Short())
	}
	testutil.Eventually(t, waitTimeout, "session ended", func() bool { return srv.Stats().Sessions == 0 })
	st := srv.Stats()
	// 2 MiB of payload plus TLS records and handshakes.
	if st.Bytes < 2<<20 || st.Bytes > 2<<20+64<<10 {
		t.Errorf("Stats.Bytes = %d, want 2 MiB plus TLS overhead", st.Bytes)
	}
	if st.Registered != 1 {
		t.Errorf("Stats.Registered = %d, want 1", st.Registered)
	}
}

// exchange handshakes, then writes out while reading n bytes.
func exchange(tc *tls.Conn, out []byte, n int) ([]byte, error) {
	tc.SetDeadline(time.Now().Add(20 * time.Second))
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	werr := make(chan error, 1)
	go func() {
		_, err := tc.Write(out)
		werr <- err
	}()
	got := make([]byte, n)
	_, err := io.ReadFull(tc, got)
	return got, errors.Join(err, <-werr)
}

// TestHalfClose: a side that closes its write half has that passed on, and
// the other direction keeps working.
func TestHalfClose(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, nil)
	a, b := identity(t, "a"), identity(t, "b")
	var wg sync.WaitGroup
	wg.Add(1)
	startClient(t, b, srv.URL(), func(conn net.Conn, _ crypt.DeviceID) {
		defer wg.Done()
		defer conn.Close()
		got, err := io.ReadAll(conn) // ends only when A's half-close arrives
		if err != nil || string(got) != "ping" {
			t.Errorf("B read %q, %v", got, err)
		}
		conn.Write([]byte("pong"))
	}, nil)
	conn, err := Dial(context.Background(), a, srv.URL(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("ping"))
	conn.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "pong" {
		t.Errorf("A read %q, %v", got, err)
	}
	wg.Wait()
}

func TestDialNotRegistered(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, nil)
	_, err := Dial(context.Background(), identity(t, "a"), srv.URL(), identity(t, "b").ID)
	if !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("Dial to an unregistered device: %v, want ErrNotRegistered", err)
	}
}

func TestDialWrongRelayID(t *testing.T) {
	relay, other := identity(t, "relay"), identity(t, "c")
	srv := startServer(t, relay, "127.0.0.1:0", 0, nil)
	url := "relay://" + srv.hostport + "/?id=" + other.ID.String()
	_, err := Dial(context.Background(), identity(t, "a"), url, identity(t, "b").ID)
	if !errors.Is(err, ErrWrongRelay) {
		t.Fatalf("Dial with the wrong relay ID: %v, want ErrWrongRelay", err)
	}
	var ude *crypt.UnknownDeviceError
	if !errors.As(err, &ude) || ude.ID != relay.ID {
		t.Fatalf("error %v does not name the device the relay is", err)
	}
	if !strings.Contains(err.Error(), other.ID.String()) {
		t.Errorf("error %q does not name the expected ID", err)
	}
}

func TestDialCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, nil)
	_, err := Dial(ctx, identity(t, "a"), srv.URL(), identity(t, "b").ID)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Dial with a canceled context: %v", err)
	}
}

// TestSessionKeys: a key works once; reused, made-up and expired keys are
// closed without an answer; a half whose partner never comes gets
// JoinTimedOut.
func TestSessionKeys(t *testing.T) {
	const ttl = 300 * time.Millisecond
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) { s.keyTTL = ttl })
	a, b := identity(t, "a"), identity(t, "b")
	reg := registerRaw(t, b, srv)
	ctx := context.Background()

	key, err := requestSession(ctx, a, srv.hostport, srv.id.ID, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := readMessage(reg)
	if err != nil || inv.GetInvitation() == nil || [keySize]byte(inv.GetInvitation().Key) != key ||
		crypt.DeviceID(inv.GetInvitation().From) != a.ID {
		t.Fatalf("target's invitation: %v, %v", inv, err)
	}
	type joined struct {
		c   *net.TCPConn
		err error
	}
	first := make(chan joined, 1)
	go func() {
		c, err := joinSession(ctx, srv.hostport, key)
		first <- joined{c, err}
	}()
	second, err := joinSession(ctx, srv.hostport, key)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	j := <-first
	if j.err != nil {
		t.Fatal(j.err)
	}
	defer j.c.Close()

	// Reused key: closed, no answer.
	if _, err := joinSession(ctx, srv.hostport, key); !errors.Is(err, ErrRefused) {
		t.Errorf("reused key: %v, want ErrRefused", err)
	}
	assertClosedWithoutAnswer(t, srv, key)
	// Made-up key.
	assertClosedWithoutAnswer(t, srv, [keySize]byte(randomBytes(t, keySize)))

	// Expired key: made, not joined for longer than it lives.
	key2, err := requestSession(ctx, a, srv.hostport, srv.id.ID, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	assertClosedWithoutAnswer(t, srv, key2)

	// A half whose partner never joins.
	key3, err := requestSession(ctx, a, srv.hostport, srv.id.ID, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = joinSession(ctx, srv.hostport, key3)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "did not join") {
		t.Errorf("lonely half: %v, want ErrRefused (did not join)", err)
	}
	if st := srv.Stats(); st.Sessions != 1 {
		t.Errorf("Stats.Sessions = %d, want 1 (the first session, still open)", st.Sessions)
	}
}

// assertClosedWithoutAnswer joins with key over a raw connection and checks
// the relay closes it without a byte.
func assertClosedWithoutAnswer(t *testing.T, srv *testServer, key [keySize]byte) {
	t.Helper()
	c, err := net.Dial("tcp", srv.hostport)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(append([]byte(sessionMagic), key[:]...))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || len(got) != 0 {
		t.Errorf("bad key answered %x, %v; want a close without answer", got, err)
	}
}

// TestMaxSessions: at the limit n, Connect n+1 is refused; sessions that
// expire unused free their places.
func TestMaxSessions(t *testing.T) {
	const ttl = 300 * time.Millisecond
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 2, func(s *Server) { s.keyTTL = ttl })
	a, b := identity(t, "a"), identity(t, "b")
	registerRaw(t, b, srv)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		_, err := requestSession(ctx, a, srv.hostport, srv.id.ID, b.ID)
		if i <= 2 && err != nil {
			t.Fatalf("session %d of 2: %v", i, err)
		}
		if i == 3 && !errors.Is(err, ErrTooManySessions) {
			t.Fatalf("session 3 of 2: %v, want ErrTooManySessions", err)
		}
	}
	time.Sleep(ttl + 100*time.Millisecond) // the two unused keys outlive their TTL
	if _, err := requestSession(ctx, a, srv.hostport, srv.id.ID, b.ID); err != nil {
		t.Fatalf("after the unused keys expired: %v", err)
	}
}

// TestRegistrationReplaced: a second Join by the same device closes the
// first registration; invitations go to the newer one.
func TestRegistrationReplaced(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, nil)
	a, b := identity(t, "a"), identity(t, "b")
	old := registerRaw(t, b, srv)
	cur := registerRaw(t, b, srv)
	old.SetReadDeadline(time.Now().Add(5 * time.Second))
	if m, err := readMessage(old); err == nil || isTimeout(err) {
		t.Fatalf("replaced registration read %v, %v; want it closed", m, err)
	}
	if n := srv.Stats().Registered; n != 1 {
		t.Fatalf("Registered = %d, want 1", n)
	}
	if _, err := requestSession(context.Background(), a, srv.hostport, srv.id.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	cur.SetReadDeadline(time.Now().Add(5 * time.Second))
	if m, err := readMessage(cur); err != nil || m.GetInvitation() == nil {
		t.Fatalf("newer registration read %v, %v; want the invitation", m, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestIdleRegistration: a registration silent for the idle time is dropped,
// and one that pings stays.
func TestIdleRegistration(t *testing.T) {
	const idle = 400 * time.Millisecond
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) {
		s.idle = idle
		s.pingEvery = time.Hour
	})
	silent := registerRaw(t, identity(t, "b"), srv)
	startClient(t, identity(t, "a"), srv.URL(), func(c net.Conn, _ crypt.DeviceID) { c.Close() },
		func(c *Client) { c.pingEvery = idle / 4 })
	start := time.Now()
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := readMessage(silent); err == nil || isTimeout(err) {
		t.Fatalf("silent registration: %v, want closed", err)
	}
	if d := time.Since(start); d < idle/2 {
		t.Errorf("silent registration dropped after %v, before its idle time %v", d, idle)
	}
	time.Sleep(2 * idle) // two idle times in which the pinging client must not be dropped
	if n := srv.Stats().Registered; n != 1 {
		t.Fatalf("Registered = %d, want 1 (the pinging client)", n)
	}
}

// TestServerPings: the relay pings a registration, and the Client answers.
func TestServerPings(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) { s.pingEvery = 50 * time.Millisecond })
	reg := registerRaw(t, identity(t, "b"), srv)
	reg.SetReadDeadline(time.Now().Add(5 * time.Second))
	m, err := readMessage(reg)
	if err != nil || m.GetPing() == nil {
		t.Fatalf("read %v, %v; want a Ping", m, err)
	}
	if err := writeMessage(reg, pingMessage()); err != nil {
		t.Fatal(err)
	}
	for { // more pings may come before the Pong
		m, err := readMessage(reg)
		if err != nil {
			t.Fatal(err)
		}
		if m.GetPong() != nil {
			break
		}
	}
}

// TestClientReregisters: the Client notices a relay going away (Address
// "", Changed) and registers again when it is back.
func TestClientReregisters(t *testing.T) {
	relay := identity(t, "relay")
	srv := startServer(t, relay, "127.0.0.1:0", 0, nil)
	c := startClient(t, identity(t, "b"), srv.URL(), func(c net.Conn, _ crypt.DeviceID) { c.Close() },
		func(c *Client) { c.minBackoff = 50 * time.Millisecond })
	if !c.Status().Registered || c.Status().Error != "" {
		t.Fatalf("Status = %+v", c.Status())
	}
	changed := c.Changed()
	srv.stop()
	waitClosed(t, changed)
	if a := c.Address(); a != "" {
		t.Fatalf("Address = %q with the relay down", a)
	}
	testutil.Eventually(t, waitTimeout, "an error in Status", func() bool { return c.Status().Error != "" })

	changed = c.Changed()
	srv2 := startServer(t, relay, srv.hostport, 0, nil)
	waitClosed(t, changed)
	testutil.Eventually(t, waitTimeout, "registered again", func() bool { return c.Address() == srv2.URL() })
	if st := c.Status(); !st.Registered || st.Relay != srv.URL() {
		t.Fatalf("Status = %+v", st)
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed did not fire")
	}
}

func TestNewClientValidates(t *testing.T) {
	id := identity(t, "a")
	accept := func(c net.Conn, _ crypt.DeviceID) { c.Close() }
	for _, url := range []string{
		"relay://127.0.0.1:22067/",
		"relay://127.0.0.1:22067/?id=nope",
		"tcp://127.0.0.1:22067/?id=" + id.ID.String(),
		"relay://127.0.0.1/?id=" + id.ID.String(),
	} {
		if _, err := NewClient(ClientConfig{Identity: id, Relay: url, Accept: accept}); !errors.Is(err, ErrBadURL) {
			t.Errorf("NewClient(%q): %v, want ErrBadURL", url, err)
		}
	}
	good := "relay://127.0.0.1:22067/?id=" + id.ID.String()
	if _, err := NewClient(ClientConfig{Identity: id, Relay: good}); err == nil {
		t.Error("NewClient without Accept succeeded")
	}
	c, err := NewClient(ClientConfig{Identity: id, Relay: good, Accept: accept})
	if err != nil {
		t.Fatal(err)
	}
	if c.Address() != "" || c.Status().Registered {
		t.Error("a new client claims to be registered")
	}
}

func TestParseURL(t *testing.T) {
	id := identity(t, "relay").ID
	for _, tc := range []struct{ url, hostport string }{
		{"relay://127.0.0.1:22067/?id=" + id.String(), "127.0.0.1:22067"},
		{"relay://127.0.0.1:22067?id=" + id.String(), "127.0.0.1:22067"},
		{"relay://[::1]:1/?id=" + strings.ToLower(id.String()), "[::1]:1"},
		{"relay://0.0.0.0:22067/?id=" + id.String(), "0.0.0.0:22067"},
	} {
		hp, got, err := ParseURL(tc.url)
		if err != nil || hp != tc.hostport || got != id {
			t.Errorf("ParseURL(%q) = %q, %v, %v", tc.url, hp, got.Short(), err)
		}
	}
	for _, bad := range []string{
		"", "relay://", "relay://host/?id=" + id.String(), "relay://h:1/x?id=" + id.String(),
		"relay://h:1/?id=" + id.String() + "&id=" + id.String(), "relay://u@h:1/?id=" + id.String(),
		"https://h:1/?id=" + id.String(), "relay://h:1/?id=" + id.String()[1:],
	} {
		if _, _, err := ParseURL(bad); !errors.Is(err, ErrBadURL) {
			t.Errorf("ParseURL(%q): %v, want ErrBadURL", bad, err)
		}
	}
}
