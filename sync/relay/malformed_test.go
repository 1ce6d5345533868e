package relay

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
)

// frameOfLength returns a frame of exactly n body bytes holding a Join
// padded with an unknown field (which receivers ignore). n >= 4.
func frameOfLength(t testing.TB, n int) []byte {
	t.Helper()
	body, err := proto.Marshal(joinMessage())
	if err != nil {
		t.Fatal(err)
	}
	for pad := 0; ; pad++ {
		b := protowire.AppendTag(bytes.Clone(body), 99, protowire.BytesType)
		b = protowire.AppendBytes(b, make([]byte, pad))
		if len(b) == n {
			return append(binary.BigEndian.AppendUint32(nil, uint32(n)), b...)
		}
		if len(b) > n {
			t.Fatalf("cannot pad a frame to %d bytes", n)
		}
	}
}

// TestFrameSizeLimit: MaxFrameSize-1 and MaxFrameSize are read; one more
// is malformed before any body byte is read.
func TestFrameSizeLimit(t *testing.T) {
	for _, n := range []int{MaxFrameSize - 1, MaxFrameSize} {
		m, err := readMessage(bytes.NewReader(frameOfLength(t, n)))
		if err != nil || m.GetJoin() == nil {
			t.Errorf("frame of %d bytes: %v, %v", n, m, err)
		}
	}
	hdr := binary.BigEndian.AppendUint32(nil, MaxFrameSize+1)
	if _, err := readMessage(bytes.NewReader(hdr)); !errors.Is(err, ErrMalformed) {
		t.Errorf("frame of %d bytes: %v, want ErrMalformed", MaxFrameSize+1, err)
	}
	// The writer refuses what the reader would.
	big := responseMessage(Response_UNAVAILABLE, string(make([]byte, maxResponseMessage+1)))
	if err := writeMessage(io.Discard, big); !errors.Is(err, ErrMalformed) {
		t.Errorf("writing an over-long Response: %v", err)
	}
}

func TestDecodeRules(t *testing.T) {
	var id crypt.DeviceID
	var key [keySize]byte
	good := []*Message{joinMessage(), pingMessage(), pongMessage(), connectMessage(id),
		invitationMessage(id, key), responseMessage(Response_NOT_REGISTERED, "x")}
	for _, m := range good {
		var buf bytes.Buffer
		if err := writeMessage(&buf, m); err != nil {
			t.Fatal(err)
		}
		got, err := readMessage(&buf)
		if err != nil || !proto.Equal(got, m) {
			t.Errorf("round trip of %v: %v, %v", m, got, err)
		}
	}
	bad := []*Message{
		{},
		{Body: &Message_Connect{Connect: &Connect{Device: make([]byte, 31)}}},
		{Body: &Message_Connect{Connect: &Connect{Device: make([]byte, 33)}}},
		{Body: &Message_Invitation{Invitation: &Invitation{From: id[:], Key: make([]byte, 31)}}},
		{Body: &Message_Invitation{Invitation: &Invitation{From: id[:1], Key: key[:]}}},
	}
	for _, m := range bad {
		body, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeMessage(body); !errors.Is(err, ErrMalformed) {
			t.Errorf("decoding %v: %v, want ErrMalformed", m, err)
		}
	}
	if _, err := decodeMessage([]byte{0xff, 0xff, 0xff}); !errors.Is(err, ErrMalformed) {
		t.Errorf("garbage: %v, want ErrMalformed", err)
	}
}

// TestMalformedConnections: each kind of bad input closes its connection,
// and the relay keeps serving a registered device throughout.
func TestMalformedConnections(t *testing.T) {
	relayID, a, b := identity(t, "relay"), identity(t, "a"), identity(t, "b")
	srv := startServer(t, relayID, "127.0.0.1:0", 0, func(s *Server) { s.handshake = time.Second })
	startClient(t, b, srv.URL(), func(c net.Conn, _ crypt.DeviceID) {
		defer c.Close()
		io.Copy(c, c)
	}, nil)

	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	joinBody, _ := proto.Marshal(joinMessage())
	invBody, _ := proto.Marshal(invitationMessage(a.ID, [keySize]byte{}))
	connectBody, _ := proto.Marshal(connectMessage(b.ID))

	tlsCases := []struct {
		name  string
		first []byte // after a good handshake
		then  []byte // sent after the first message was answered
	}{
		{"oversized length", binary.BigEndian.AppendUint32(nil, MaxFrameSize+1), nil},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}, nil},
		{"garbage protobuf", frame([]byte{0xff, 0xfe, 0xfd, 0x01}), nil},
		{"empty message", frame(nil), nil},
		{"invitation from a client", frame(invBody), nil},
		{"truncated frame", frame(joinBody)[:5], nil},
		{"connect on a registration", frame(joinBody), frame(connectBody)},
		{"garbage on a registration", frame(joinBody), frame([]byte{0x0a})},
	}
	for _, tc := range tlsCases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := dialProtocol(context.Background(), a, srv.hostport, relayID.ID)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write(tc.first)
			if tc.name == "truncated frame" {
				conn.NetConn().(*net.TCPConn).CloseWrite()
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if tc.then != nil {
				if m, err := readMessage(conn); err != nil || m.GetResponse() == nil {
					t.Fatalf("join answered %v, %v", m, err)
				}
				conn.Write(tc.then)
			}
			assertClosed(t, conn)
			assertStillServing(t, srv, a, b.ID)
		})
	}

	rawCases := []struct {
		name string
		send []byte
	}{
		{"join before TLS", frame(joinBody)},
		{"bad session magic", append([]byte("LSRELAY2"), make([]byte, keySize)...)},
		{"short session join", []byte(sessionMagic + "abc")},
		{"nothing at all", nil},
		{"TLS record then garbage", []byte{0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5}},
	}
	for _, tc := range rawCases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.hostport)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write(tc.send)
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			assertClosed(t, conn)
			assertStillServing(t, srv, a, b.ID)
		})
	}

	t.Run("TLS without a client certificate", func(t *testing.T) {
		cfg := crypt.ClientTLSConfig(a, relayID.ID)
		cfg.Certificates = nil
		cfg.NextProtos = []string{ALPN}
		conn, err := tls.Dial("tcp", srv.hostport, cfg)
		if err == nil {
			defer conn.Close()
			conn.Write(frame(joinBody))
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			assertClosed(t, conn)
		}
		assertStillServing(t, srv, a, b.ID)
	})
	t.Run("another ALPN", func(t *testing.T) {
		cfg := crypt.ClientTLSConfig(a, relayID.ID) // lockstep/1
		conn, err := tls.Dial("tcp", srv.hostport, cfg)
		if err == nil {
			conn.Close()
			t.Fatal("handshake with another ALPN succeeded")
		}
		assertStillServing(t, srv, a, b.ID)
	})
}

// assertClosed reads until the peer closes; a timeout fails.
func assertClosed(t *testing.T, r io.Reader) {
	t.Helper()
	buf := make([]byte, 1024)
	for {
		_, err := r.Read(buf)
		if err == nil {
			continue
		}
		if isTimeout(err) {
			t.Fatal("connection still open")
		}
		return
	}
}

// assertStillServing dials target through the relay and echoes a message.
func assertStillServing(t *testing.T, srv *testServer, from *crypt.Identity, target crypt.DeviceID) {
	t.Helper()
	conn, err := Dial(context.Background(), from, srv.URL(), target)
	if err != nil {
		t.Fatal("relay no longer serves:", err)
	}
	defer conn.Close()
	conn.Write([]byte("still here"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len("still here"))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "still here" {
		t.Fatalf("echo through the relay: %q, %v", got, err)
	}
}
