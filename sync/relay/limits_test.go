package relay

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// TestSpliceIdle: a spliced session in which nothing moves ends after the
// idle time, so silent sessions can't hold the relay's places; one that
// keeps talking (as devices' pings do) lives on past it.
func TestSpliceIdle(t *testing.T) {
	const idle = 300 * time.Millisecond
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) { s.spliceIdle = idle })
	a, b := identity(t, "a"), identity(t, "b")
	far := make(chan net.Conn, 2)
	startClient(t, b, srv.URL(), func(conn net.Conn, _ crypt.DeviceID) { far <- conn }, nil)

	// Talking both ways (devices ping each way): a byte each way every
	// idle/3, for three idle times.
	talk, err := Dial(context.Background(), a, srv.URL(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer talk.Close()
	fb := <-far
	defer fb.Close()
	for range 9 {
		if _, err := talk.Write([]byte{1}); err != nil {
			t.Fatalf("an active session was cut: %v", err)
		}
		fb.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(fb, make([]byte, 1)); err != nil {
			t.Fatalf("an active session was cut: %v", err)
		}
		if _, err := fb.Write([]byte{2}); err != nil {
			t.Fatalf("an active session was cut: %v", err)
		}
		talk.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(talk, make([]byte, 1)); err != nil {
			t.Fatalf("an active session was cut: %v", err)
		}
		time.Sleep(idle / 3)
	}

	// Silent: the relay closes it.
	quiet, err := Dial(context.Background(), a, srv.URL(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	fq := <-far
	defer fq.Close()
	quiet.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := quiet.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a silent session was not ended by the relay: %v", err)
	}
	// Both sessions are silent now: their places are freed.
	testutil.Eventually(t, waitTimeout, "the sessions to be gone", func() bool { return srv.Stats().Sessions == 0 })
}

// TestMaxRegistrations: the relay takes n registrations, refuses the
// n+1st, and always lets a registered device register again.
func TestMaxRegistrations(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) { s.maxRegs = 2 })
	registerRaw(t, identity(t, "a"), srv)
	registerRaw(t, identity(t, "b"), srv)
	tc, err := dialProtocol(context.Background(), identity(t, "c"), srv.hostport, srv.id.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.NetConn().Close()
	if err := writeMessage(tc, joinMessage()); err != nil {
		t.Fatal(err)
	}
	m, err := readMessage(tc)
	if err != nil || m.GetResponse().GetCode() != Response_UNAVAILABLE {
		t.Fatalf("the third registration was answered %v, %v; want UNAVAILABLE", m, err)
	}
	registerRaw(t, identity(t, "a"), srv) // a again: replaces its own
	if got := srv.Stats().Registered; got != 2 {
		t.Fatalf("registered = %d, want 2", got)
	}
}

// TestSessionsPerDevice: one device can hold at most n sessions, as
// requester or target, so it can't take every place of the relay; its
// places come back when its sessions end, and other devices are not held
// back by it.
func TestSessionsPerDevice(t *testing.T) {
	srv := startServer(t, identity(t, "relay"), "127.0.0.1:0", 0, func(s *Server) { s.maxPerDevice = 2 })
	a, b, c, d := identity(t, "a"), identity(t, "b"), identity(t, "c"), identity(t, "d")
	held := make(chan net.Conn, 16)
	keep := func(conn net.Conn, _ crypt.DeviceID) { held <- conn }
	startClient(t, b, srv.URL(), keep, nil)
	startClient(t, c, srv.URL(), keep, nil)
	var mine []net.Conn
	defer func() {
		for _, c := range mine {
			c.Close()
		}
	}()
	dial := func(from *crypt.Identity, to crypt.DeviceID) error {
		conn, err := Dial(context.Background(), from, srv.URL(), to)
		if err == nil {
			mine = append(mine, conn, <-held)
		}
		return err
	}
	for i := range 2 {
		if err := dial(a, b.ID); err != nil {
			t.Fatalf("session %d of a: %v", i+1, err)
		}
	}
	if err := dial(a, c.ID); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("a's third session: %v, want ErrTooManySessions", err)
	}
	if err := dial(d, b.ID); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("b's third session: %v, want ErrTooManySessions", err)
	}
	if err := dial(d, c.ID); err != nil {
		t.Fatalf("d to c, neither at its limit: %v", err)
	}
	// a's sessions end: its places come back.
	for _, conn := range mine[:4] {
		conn.Close()
	}
	testutil.Eventually(t, waitTimeout, "a's sessions to end", func() bool { return srv.Stats().Sessions == 1 })
	if err := dial(a, c.ID); err != nil {
		t.Fatalf("a after its sessions ended: %v", err)
	}
}
