package connections

import (
	"bufio"
	"net"
)

// readBuffer is the read buffer under TLS. Without it, TLS reads one
// record (at most 16 KiB) per system call; with it, one call brings in many
// records, which matters when a peer streams gigabytes of blocks.
const readBuffer = 256 << 10

// bufferedConn is a net.Conn whose reads go through a buffer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

// Buffered returns c with its reads buffered, for a TLS connection to run
// over: every lockstep connection, the recovery's included, is one.
func Buffered(c net.Conn) net.Conn {
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, readBuffer)}
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
