package connections

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// tlsPair returns both ends of a loopback TLS connection between two new
// identities, handshaken, with the client's socket writes counted.
func tlsPair(t *testing.T) (client, server *BatchConn, counted *countingConn) {
	t.Helper()
	near, far, err := tcpPair()
	if err != nil {
		t.Fatal(err)
	}
	a, b := identity(t, "a"), identity(t, "b")
	counted = &countingConn{Conn: near}
	client = Client(counted, crypt.ClientTLSConfig(a, b.ID))
	server = Server(far, crypt.ServerTLSConfig(b, func(crypt.DeviceID) bool { return true }))
	errc := make(chan error, 1)
	go func() { errc <- server.HandshakeContext(context.Background()) }()
	if err := client.HandshakeContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return client, server, counted
}

// TestBatchedWrites: between Hold and Flush, the records TLS writes go out
// in a few large system calls instead of one each, and the peer reads the
// same bytes in the same order as when they go straight out.
func TestBatchedWrites(t *testing.T) {
	defer goleak.VerifyNone(t)
	client, server, counted := tlsPair(t)
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7 / 5)
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(server, int64(2*len(data))))
		got <- b
	}()

	before := counted.writes.Load()
	if _, err := client.Write(data); err != nil {
		t.Fatal(err)
	}
	straight := counted.writes.Load() - before

	before = counted.writes.Load()
	client.Hold()
	// Many small writes too, each its own record.
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := client.Write(data[off : off+1000]); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Write(data[off+1000 : off+1<<20]); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.Flush(); err != nil {
		t.Fatal(err)
	}
	batched := counted.writes.Load() - before

	if b := <-got; !bytes.Equal(b[:len(data)], data) || !bytes.Equal(b[len(data):], data) {
		t.Fatal("the peer read other bytes than were written")
	}
	// 4 MiB is 256 records of 16 KiB, and at least 16 batches of 256 KiB.
	if straight < 256 {
		t.Errorf("%d socket writes without Hold, want one per record (256 or more)", straight)
	}
	if batched > 4<<20/bufferSize+8 {
		t.Errorf("%d socket writes between Hold and Flush, want about %d", batched, 4<<20/bufferSize)
	}
	t.Logf("4 MiB: %d socket writes straight, %d batched", straight, batched)
}

// TestWritesAfterFlushGoStraightOut: once flushed, a write reaches the peer
// without another Flush; a Flush with nothing held back is no system call.
func TestWritesAfterFlushGoStraightOut(t *testing.T) {
	defer goleak.VerifyNone(t)
	client, server, counted := tlsPair(t)
	client.Hold()
	if err := client.Flush(); err != nil {
		t.Fatal(err)
	}
	before := counted.writes.Load()
	if err := client.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := counted.writes.Load() - before; n != 0 {
		t.Errorf("an empty Flush made %d socket writes", n)
	}
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	server.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}
}

// TestCloseEndsBlockedFlush: a Flush blocked on a peer that stopped
// reading ends as soon as the connection is closed. TLS would otherwise
// first try for five seconds to send its closing alert behind the blocked
// bytes.
func TestCloseEndsBlockedFlush(t *testing.T) {
	defer goleak.VerifyNone(t)
	client, _, _ := tlsPair(t)
	// Less than the buffer holds, so the socket fills in a Flush rather
	// than in a Write; batch after batch until the sockets' buffers are full.
	data := make([]byte, bufferSize/4)
	flushed := make(chan error, 1)
	go func() {
		for {
			client.Hold()
			if _, err := client.Write(data); err != nil {
				client.Flush()
				flushed <- err
				return
			}
			if err := client.Flush(); err != nil {
				flushed <- err
				return
			}
		}
	}()
	testutil.Eventually(t, 30*time.Second, "the writer to block in a Flush", func() bool {
		return client.raw.flushing.Load() && stuck(client)
	})
	start := time.Now()
	client.Close()
	select {
	case err := <-flushed:
		if err == nil {
			t.Fatal("the blocked Flush succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the blocked Flush did not end")
	}
	// The alert's deadline is 5 s; this bound is about that wait, not speed.
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v: it waited for TLS's closing alert", d)
	}
	if err := client.Flush(); !errors.Is(err, net.ErrClosed) && err != nil {
		t.Errorf("Flush after Close: %v", err)
	}
}

// stuck reports whether c's flush has been under way for a while: it samples
// the flag over 100 ms.
func stuck(c *BatchConn) bool {
	for range 10 {
		if !c.raw.flushing.Load() {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
