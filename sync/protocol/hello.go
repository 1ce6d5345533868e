package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

const (
	// ProtocolVersion is the protocol_version this package speaks.
	ProtocolVersion = 1

	// HelloTimeout bounds ExchangeHello when its context has no deadline.
	HelloTimeout = 30 * time.Second

	// maxHelloFrame is the largest Hello frame accepted.
	maxHelloFrame = 64 << 10
)

// deadliner is the part of net.Conn that ExchangeHello uses to bound its
// reads and writes.
type deadliner interface {
	SetDeadline(t time.Time) error
}

// ExchangeHello sends mine, with its protocol_version set to
// ProtocolVersion, and reads the peer's Hello, both at once. It is the
// first exchange on a connection, before NewConn. It gives up when ctx ends,
// or after HelloTimeout if ctx has no deadline: if rw has a SetDeadline
// method (a net.Conn does), the deadline is set for the exchange and
// cleared afterwards; otherwise an rw that is an io.Closer is closed.
//
// Errors: a first frame that is not a Hello, or malformed, wraps
// ErrMalformed; a peer speaking another protocol version gives its Hello and
// an error wrapping ErrProtocolVersion; running out of time wraps
// ErrTimeout. After any error the connection should be closed.
func ExchangeHello(ctx context.Context, rw io.ReadWriter, mine *Hello) (*Hello, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, HelloTimeout)
		defer cancel()
	}
	out := proto.Clone(mine).(*Hello)
	out.ProtocolVersion = ProtocolVersion
	frame, err := appendFrame(nil, out)
	if err != nil {
		return nil, fmt.Errorf("sending hello: %w", err)
	}

	stopper := newInterrupter(rw)
	if dl, ok := rw.(deadliner); ok {
		deadline, _ := ctx.Deadline()
		if err := dl.SetDeadline(deadline); err != nil {
			return nil, fmt.Errorf("setting hello deadline: %w", err)
		}
	}
	stop := context.AfterFunc(ctx, stopper.interrupt)
	defer stop()

	written := make(chan error, 1)
	go func() {
		_, err := rw.Write(frame)
		written <- err
	}()
	msg, readErr := readMessage(rw, maxHelloFrame)
	if readErr != nil {
		stopper.interrupt()
	}
	writeErr := <-written
	stopper.finish()

	if err := helloError(ctx, readErr, writeErr); err != nil {
		return nil, err
	}
	peer, ok := msg.(*Hello)
	if !ok {
		return nil, fmt.Errorf("%w: first message is %v, not a hello", ErrMalformed, typeOf(msg).name())
	}
	if peer.GetProtocolVersion() != ProtocolVersion {
		return peer, fmt.Errorf("%w: peer speaks %d, we speak %d", ErrProtocolVersion, peer.GetProtocolVersion(), ProtocolVersion)
	}
	return peer, nil
}

// helloError picks the error ExchangeHello reports: the context's end
// first, then the read's (it says more about the peer; a failed read also
// interrupts the write), then the write's. The connection's deadline is the
// context's, and may be seen before the context ends.
func helloError(ctx context.Context, readErr, writeErr error) error {
	if readErr == nil && writeErr == nil {
		return nil
	}
	err := readErr
	if err == nil {
		err = writeErr
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(ctxErr, context.DeadlineExceeded) {
		return fmt.Errorf("exchanging hello: %w", ctxErr)
	}
	if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: no hello in time", ErrTimeout)
	}
	if readErr != nil {
		return fmt.Errorf("reading hello: %w", readErr)
	}
	return fmt.Errorf("sending hello: %w", writeErr)
}

// interrupter unblocks the reads and writes of an exchange on rw, once, and
// never after the exchange finished.
type interrupter struct {
	rw       io.ReadWriter
	mu       sync.Mutex
	finished bool
}

func newInterrupter(rw io.ReadWriter) *interrupter {
	return &interrupter{rw: rw}
}

// interrupt makes pending reads and writes on rw fail: by a past deadline,
// else by closing rw.
func (i *interrupter) interrupt() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.finished {
		return
	}
	i.finished = true
	if dl, ok := i.rw.(deadliner); ok {
		_ = dl.SetDeadline(time.Unix(1, 0))
		return
	}
	if c, ok := i.rw.(io.Closer); ok {
		_ = c.Close()
	}
}

// finish ends the exchange: later interrupts do nothing, and a deadline set
// for it is cleared.
func (i *interrupter) finish() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.finished = true
	if dl, ok := i.rw.(deadliner); ok {
		_ = dl.SetDeadline(time.Time{})
	}
}
