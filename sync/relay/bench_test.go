package relay

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"

	"lockstep/crypt"
)

// BenchmarkThroughput measures bytes per second from A to B through a relay
// on loopback: raw, the relay's own cost, and with the devices' TLS on top
// as in use.
func BenchmarkThroughput(b *testing.B) {
	for _, withTLS := range []bool{false, true} {
		name := "raw"
		if withTLS {
			name = "tls"
		}
		b.Run(name, func(b *testing.B) { benchThroughput(b, withTLS) })
	}
}

func benchThroughput(b *testing.B, withTLS bool) {
	relay, ida, idb := identity(b, "relay"), identity(b, "a"), identity(b, "b")
	srv := startServer(b, relay, "127.0.0.1:0", 0, nil)
	received := make(chan int64, 1)
	startClient(b, idb, srv.URL(), func(conn net.Conn, _ crypt.DeviceID) {
		defer conn.Close()
		var r io.Reader = conn
		if withTLS {
			r = tls.Server(conn, crypt.ServerTLSConfig(idb, func(crypt.DeviceID) bool { return true }))
		}
		n, _ := io.Copy(io.Discard, r)
		received <- n
	}, nil)
	conn, err := Dial(context.Background(), ida, srv.URL(), idb.ID)
	if err != nil {
		b.Fatal(err)
	}
	var w io.WriteCloser = conn
	if withTLS {
		tc := tls.Client(conn, crypt.ClientTLSConfig(ida, idb.ID))
		if err := tc.Handshake(); err != nil {
			b.Fatal(err)
		}
		w = tc
	}
	buf := make([]byte, 256<<10)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	n := <-received
	b.StopTimer()
	if n != int64(b.N)*int64(len(buf)) {
		b.Fatalf("B received %d bytes, A sent %d", n, b.N*len(buf))
	}
}
