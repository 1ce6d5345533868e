package crypt

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// handshakeResult is what one side of a test connection saw.
type handshakeResult struct {
	err   error // handshake error
	state tls.ConnectionState
	read  error // error of reading the peer's greeting after the handshake
}

// handshake connects a client and a server over real TCP on 127.0.0.1 with
// the given configs. Each side, if its handshake succeeds, writes one
// greeting byte and reads the other's, so a refusal that TLS 1.3 reports
// only after the handshake shows up in read.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) (server, client handshakeResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan handshakeResult, 1)
	go func() {
		var r handshakeResult
		defer func() { done <- r }()
		raw, err := ln.Accept()
		if err != nil {
			r.err = err
			return
		}
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(raw, serverCfg)
		r.err = tc.HandshakeContext(ctx)
		r.state = tc.ConnectionState()
		if r.err == nil {
			r.read = greet(tc)
		}
	}()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(raw, clientCfg)
	client.err = tc.HandshakeContext(ctx)
	client.state = tc.ConnectionState()
	if client.err == nil {
		client.read = greet(tc)
	}
	raw.Close()
	return <-done, client
}

// greet writes one byte and reads one from c.
func greet(c *tls.Conn) error {
	if _, err := c.Write([]byte{'!'}); err != nil {
		return err
	}
	var b [1]byte
	_, err := io.ReadFull(c, b[:])
	return err
}

func newTestIdentity(t *testing.T) *Identity {
	t.Helper()
	id, _, err := LoadOrCreateIdentity(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func trustOnly(ids ...DeviceID) func(DeviceID) bool {
	return func(d DeviceID) bool {
		for _, id := range ids {
			if d == id {
				return true
			}
		}
		return false
	}
}

func TestTLSKnownPair(t *testing.T) {
	srv, cli := newTestIdentity(t), newTestIdentity(t)
	s, c := handshake(t, ServerTLSConfig(srv, trustOnly(cli.ID)), ClientTLSConfig(cli, srv.ID))
	if s.err != nil || c.err != nil || s.read != nil || c.read != nil {
		t.Fatalf("server %+v, client %+v", s, c)
	}
	if got, err := PeerDeviceID(s.state); err != nil || got != cli.ID {
		t.Errorf("server sees peer %v, %v; want %v", got, err, cli.ID)
	}
	if got, err := PeerDeviceID(c.state); err != nil || got != srv.ID {
		t.Errorf("client sees peer %v, %v; want %v", got, err, srv.ID)
	}
	for _, st := range []tls.ConnectionState{s.state, c.state} {
		if st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != ALPN {
			t.Errorf("version %x, ALPN %q", st.Version, st.NegotiatedProtocol)
		}
	}
}

func TestTLSUnknownClient(t *testing.T) {
	srv, cli, other := newTestIdentity(t), newTestIdentity(t), newTestIdentity(t)
	s, c := handshake(t, ServerTLSConfig(srv, trustOnly(other.ID)), ClientTLSConfig(cli, srv.ID))
	var unk *UnknownDeviceError
	if !errors.As(s.err, &unk) || unk.ID != cli.ID {
		t.Fatalf("server err = %v, want UnknownDeviceError for %v", s.err, cli.ID)
	}
	// TLS 1.3: the client may finish its handshake before the server
	// rejects it, but it never gets to talk.
	if c.err == nil && c.read == nil {
		t.Fatal("client got through")
	}
}

func TestTLSClientRefusesOtherServer(t *testing.T) {
	srv, cli, expected := newTestIdentity(t), newTestIdentity(t), newTestIdentity(t)
	s, c := handshake(t, ServerTLSConfig(srv, trustOnly(cli.ID)), ClientTLSConfig(cli, expected.ID))
	var unk *UnknownDeviceError
	if !errors.As(c.err, &unk) || unk.ID != srv.ID {
		t.Fatalf("client err = %v, want UnknownDeviceError for %v", c.err, srv.ID)
	}
	if s.err == nil && s.read == nil {
		t.Fatal("server got through")
	}
}

func TestTLS12Refused(t *testing.T) {
	srv, cli := newTestIdentity(t), newTestIdentity(t)
	old := ClientTLSConfig(cli, srv.ID)
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	s, c := handshake(t, ServerTLSConfig(srv, trustOnly(cli.ID)), old)
	if s.err == nil || c.err == nil {
		t.Fatalf("TLS 1.2 handshake: server %v, client %v; want both to fail", s.err, c.err)
	}
}

func TestTLSClientWithoutCertificate(t *testing.T) {
	srv, cli := newTestIdentity(t), newTestIdentity(t)
	bare := ClientTLSConfig(cli, srv.ID)
	bare.Certificates = nil
	s, c := handshake(t, ServerTLSConfig(srv, func(DeviceID) bool { return true }), bare)
	if s.err == nil || (c.err == nil && c.read == nil) {
		t.Fatalf("server %v, client %+v: want refusal", s.err, c)
	}
}

func TestPeerDeviceIDIncomplete(t *testing.T) {
	if _, err := PeerDeviceID(tls.ConnectionState{}); !errors.Is(err, ErrNoPeerCertificate) {
		t.Fatalf("err = %v, want ErrNoPeerCertificate", err)
	}
}

func TestUnknownDeviceErrorMessage(t *testing.T) {
	id := DeviceIDFromSPKI([]byte("x"))
	if got, want := (&UnknownDeviceError{ID: id}).Error(), "unknown device "+id.String(); got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
