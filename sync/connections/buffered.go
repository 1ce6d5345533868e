package connections

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
)

// bufferSize is the size of the read buffer and of the write batch under
// TLS. TLS reads and writes one record (at most 16 KiB) per system call;
// when a peer streams gigabytes of blocks, one call per 256 KiB halves the
// CPU the socket costs both ends (on loopback, 0.8 against 0.4 CPU seconds
// per GiB).
const bufferSize = 256 << 10

// BatchConn is a TLS connection whose reads are buffered and whose writes
// can be batched: between Hold and Flush, the records TLS writes collect in
// a buffer and go out in a few large system calls. Every lockstep
// connection, the recovery's included, is one.
type BatchConn struct {
	*tls.Conn
	raw *bufferedConn
}

// Client returns the client side of a TLS connection over raw.
func Client(raw net.Conn, cfg *tls.Config) *BatchConn {
	b := newBuffered(raw)
	return &BatchConn{Conn: tls.Client(b, cfg), raw: b}
}

// Server returns the server side of a TLS connection over raw.
func Server(raw net.Conn, cfg *tls.Config) *BatchConn {
	b := newBuffered(raw)
	return &BatchConn{Conn: tls.Server(b, cfg), raw: b}
}

// Hold keeps what is written from now on in the buffer, until Flush.
func (c *BatchConn) Hold() { c.raw.hold() }

// Flush sends what Hold kept back, and writes go straight out again.
func (c *BatchConn) Flush() error { return c.raw.flush() }

// Close closes the connection. TLS closes the socket at once only when a
// Write is under way; a Flush blocked on a peer that stopped reading is
// outside any Write, so it is ended here, rather than have TLS wait its
// five seconds to send its closing alert behind it.
func (c *BatchConn) Close() error {
	// Each side stores its flag before it loads the other's, so a Flush
	// starting now either sees closing or is seen here.
	c.raw.closing.Store(true)
	if c.raw.flushing.Load() {
		c.raw.Conn.Close()
	}
	return c.Conn.Close()
}

// bufferedConn is the net.Conn under TLS.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader

	closing  atomic.Bool
	flushing atomic.Bool
	mu       sync.Mutex // guards the fields below
	held     bool
	out      []byte
}

func newBuffered(c net.Conn) *bufferedConn {
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, bufferSize)}
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Write is called by TLS, one record at a time, under its own lock; the
// mutex here orders it with hold and flush.
func (c *bufferedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out)+len(p) > cap(c.out) || !c.held {
		if err := c.sendLocked(); err != nil {
			return 0, err
		}
	}
	if !c.held || len(p) > cap(c.out) {
		return c.Conn.Write(p)
	}
	c.out = append(c.out, p...)
	return len(p), nil
}

func (c *bufferedConn) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = true
	if c.out == nil {
		c.out = make([]byte, 0, bufferSize)
	}
}

func (c *bufferedConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
	c.flushing.Store(true)
	defer c.flushing.Store(false)
	if c.closing.Load() {
		c.out = c.out[:0]
		return net.ErrClosed
	}
	return c.sendLocked()
}

// sendLocked writes out what is buffered. After an error the bytes are
// dropped: TLS treats a failed write as the end of the connection.
func (c *bufferedConn) sendLocked() error {
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.out)
	c.out = c.out[:0]
	return err
}
