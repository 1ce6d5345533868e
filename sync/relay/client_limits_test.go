package relay

import (
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// TestInvitationFlood: a relay (hostile, or one an attacker asks for
// session after session) that sends invitation after invitation makes the
// client join at most maxJoining sessions at once; the rest are dropped.
func TestInvitationFlood(t *testing.T) {
	relayID := identity(t, "fake-relay")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "relay://" + ln.Addr().String() + "/?id=" + relayID.ID.String()
	const invitations = 1000

	var (
		mu    sync.Mutex
		conns []net.Conn
		joins int
		wg    sync.WaitGroup
	)
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	from := freshIdentity(t).ID
	cfg := crypt.ServerTLSConfig(relayID, func(crypt.DeviceID) bool { return true })
	cfg.NextProtos = []string{ALPN}
	// The fake relay: registrations are answered OK and sent the
	// invitations; session joins are held unanswered.
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				var first [1]byte
				if _, err := io.ReadFull(c, first[:]); err != nil {
					return
				}
				if first[0] != 0x16 {
					mu.Lock()
					joins++
					mu.Unlock()
					io.Copy(io.Discard, c)
					return
				}
				tc := tls.Server(&prefixConn{Conn: c, first: first[:]}, cfg)
				if _, err := readMessage(tc); err != nil {
					return
				}
				if writeMessage(tc, responseMessage(Response_OK, "")) != nil {
					return
				}
				for range invitations {
					var key [keySize]byte
					rand.Read(key[:])
					if writeMessage(tc, invitationMessage(from, key)) != nil {
						return
					}
				}
				io.Copy(io.Discard, tc)
			})
		}
	})

	startClient(t, freshIdentity(t), url, func(conn net.Conn, _ crypt.DeviceID) { conn.Close() }, nil)
	joined := func() int {
		mu.Lock()
		defer mu.Unlock()
		return joins
	}
	testutil.Eventually(t, waitTimeout, "the client to join sessions", func() bool { return joined() >= maxJoining })
	time.Sleep(200 * time.Millisecond) // any more would have come by now
	if n := joined(); n != maxJoining {
		t.Fatalf("the client joined %d sessions at once after %d invitations, want %d", n, invitations, maxJoining)
	}
}
