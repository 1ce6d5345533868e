package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
)

// DeviceID identifies a device: SHA-256 of its certificate's public key.
type DeviceID = [DeviceIDSize]byte

// Model is what a connection needs from the rest of the program. The
// engine implements it; this package never imports the engine.
//
// ClusterConfig, Index and IndexUpdate are called one at a time, in the
// order the peer sent the messages, from the connection's reader: while
// one runs, nothing more is read from the peer (and the receive timeout is
// suspended). Request is called concurrently with everything, at most
// Options.MaxIncomingRequests at a time. An error from ClusterConfig, Index
// or IndexUpdate ends the connection with that error. An error from Request
// is sent to the peer as an ErrorCode (see ErrNoSuchFile, ErrInvalidFile);
// the data Request returns must be at most req.Size bytes, else the peer is
// sent ERROR_CODE_GENERIC. Closed is called exactly once per Serve, after
// every other call on the Model from this Conn has returned.
type Model interface {
	ClusterConfig(peer DeviceID, cc *ClusterConfig) error
	Index(peer DeviceID, idx *Index) error
	IndexUpdate(peer DeviceID, idx *IndexUpdate) error
	Request(ctx context.Context, peer DeviceID, req *Request) ([]byte, error)
	Closed(peer DeviceID, err error)
}

// SealedModel is an optional ability of a Model: it takes SealedIndex and
// SealedAck messages (encrypted folders), called like Index. A Conn whose
// model lacks it treats those messages as malformed.
type SealedModel interface {
	SealedIndex(peer DeviceID, idx *SealedIndex) error
	SealedAck(peer DeviceID, ack *SealedAck) error
}

// ClaimsModel is an optional ability of a Model: it takes ReceiverClaims
// messages (between trusted devices, for fork detection), called like
// Index. A Conn whose model lacks it treats those messages as malformed.
type ClaimsModel interface {
	ReceiverClaims(peer DeviceID, rc *ReceiverClaims) error
}

// Releaser is an optional ability of a Model: Release is called with the
// data a Request returned once the connection no longer needs it, so the
// model can reuse the buffer.
type Releaser interface {
	Release(data []byte)
}

// Defaults for the zero fields of Options.
const (
	DefaultPingInterval        = 90 * time.Second
	DefaultTimeout             = 5 * time.Minute
	DefaultMaxIncomingRequests = 64
	DefaultMaxOutgoingRequests = 64
	DefaultWriteQueue          = 64

	// maxCloseWait bounds how long Close waits for its Close frame to go.
	maxCloseWait = 10 * time.Second
)

// Options tune a Conn. Zero or negative fields take the defaults above.
type Options struct {
	// PingInterval: a Ping is sent when nothing was sent for this long.
	PingInterval time.Duration
	// Timeout: the connection fails with ErrTimeout when nothing was
	// received, or one write was blocked, for this long. Keep it well above
	// the peer's PingInterval.
	Timeout time.Duration
	// MaxIncomingRequests bounds the peer's requests handled at once, each
	// in its own goroutine; beyond it the reader waits for a free slot.
	MaxIncomingRequests int
	// MaxOutgoingRequests bounds our requests in flight; further Request
	// calls wait for a free slot. Keep it at most the peer's
	// MaxIncomingRequests so the peer's reader never waits on us.
	MaxOutgoingRequests int
	// WriteQueue is how many encoded frames may wait for the writer.
	WriteQueue int
}

func (o Options) withDefaults() Options {
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxIncomingRequests <= 0 {
		o.MaxIncomingRequests = DefaultMaxIncomingRequests
	}
	if o.MaxOutgoingRequests <= 0 {
		o.MaxOutgoingRequests = DefaultMaxOutgoingRequests
	}
	if o.WriteQueue <= 0 {
		o.WriteQueue = DefaultWriteQueue
	}
	return o
}

// Conn is one protocol connection to a peer, after the Hello exchange. All
// its methods are safe for concurrent use. Messages are sent in the order
// their sending methods returned. A Conn is served once: after Serve
// returns, every method returns an error wrapping ErrClosed.
type Conn struct {
	peer  DeviceID
	rw    io.ReadWriteCloser
	model Model
	opts  Options

	outbox   chan outFrame
	incoming chan struct{} // semaphore: peer's requests being handled
	outgoing chan struct{} // semaphore: our requests in flight

	nextID  atomic.Int64
	mu      sync.Mutex
	pending map[int64]pendingRequest

	served   atomic.Bool
	closing  atomic.Bool // Close was called: the reader's end is ErrClosed
	failOnce sync.Once
	done     chan struct{} // closed when the connection has ended
	err      error         // why it ended; written before done is closed

	lastRecv  atomic.Int64 // UnixNano of the last frame read or Model call finished
	lastSend  atomic.Int64 // UnixNano of the last write finished
	writeFrom atomic.Int64 // UnixNano a pending write started; 0 when none
	inModel   atomic.Bool  // the reader is in a Model call
}

// outFrame is an encoded frame waiting for the writer.
type outFrame struct {
	data   []byte
	last   bool // a Close frame: end the connection once it is written
	pooled bool // data came from getBuf and is recycled once written
	// tail, if set, is the rest of the frame, written from the model's
	// buffer, which release hands back once it is written.
	tail    []byte
	release func()
}

// pendingRequest is one of our requests awaiting its Response.
type pendingRequest struct {
	resp chan *Response // buffered, receives at most one Response
	size uint32
}

// NewConn returns a connection to peer over rw, which must already be
// authenticated and past ExchangeHello. Nothing happens until Serve runs;
// messages sent before that wait in the write queue. The Conn owns rw and
// closes it when the connection ends.
func NewConn(peer DeviceID, rw io.ReadWriteCloser, m Model, opts Options) *Conn {
	opts = opts.withDefaults()
	return &Conn{
		peer:     peer,
		rw:       rw,
		model:    m,
		opts:     opts,
		outbox:   make(chan outFrame, opts.WriteQueue),
		incoming: make(chan struct{}, opts.MaxIncomingRequests),
		outgoing: make(chan struct{}, opts.MaxOutgoingRequests),
		pending:  make(map[int64]pendingRequest),
		done:     make(chan struct{}),
	}
}

// Peer returns the device ID of the peer.
func (c *Conn) Peer() DeviceID { return c.peer }

// ClusterConfig sends cc. It returns once cc is queued for sending, which
// does not mean the peer has it; if ctx ends first, cc is not sent.
func (c *Conn) ClusterConfig(ctx context.Context, cc *ClusterConfig) error {
	return c.send(ctx, cc)
}

// Index sends idx, queued like ClusterConfig. An index larger than
// MaxFrameSize gives ErrFrameTooLarge; split it with BatchFiles.
func (c *Conn) Index(ctx context.Context, idx *Index) error {
	return c.send(ctx, idx)
}

// IndexUpdate sends idx, queued like ClusterConfig.
func (c *Conn) IndexUpdate(ctx context.Context, idx *IndexUpdate) error {
	return c.send(ctx, idx)
}

// SealedIndex sends idx, queued like ClusterConfig.
func (c *Conn) SealedIndex(ctx context.Context, idx *SealedIndex) error {
	return c.send(ctx, idx)
}

// SealedAck sends ack, queued like ClusterConfig.
func (c *Conn) SealedAck(ctx context.Context, ack *SealedAck) error {
	return c.send(ctx, ack)
}

// ReceiverClaims sends rc, queued like ClusterConfig. More than
// MaxReceiverClaims claims give ErrMalformed: split them.
func (c *Conn) ReceiverClaims(ctx context.Context, rc *ReceiverClaims) error {
	return c.send(ctx, rc)
}

// Request asks the peer for req.Size bytes at req.Offset of req.Name and
// waits for the answer. The Conn assigns the request ID (req is not
// modified); many requests may be in flight, up to
// Options.MaxOutgoingRequests, beyond which Request waits for a slot. When
// ctx ends, Request returns ctx's error at once and a late answer is
// dropped. The peer's error codes come back as ErrNoSuchFile,
// ErrInvalidFile or ErrRequestFailed; data longer than req.Size as
// ErrMalformed. On success the data is at most req.Size bytes (less only
// if the file is shorter) and belongs to the caller.
func (c *Conn) Request(ctx context.Context, req *Request) ([]byte, error) {
	select {
	case c.outgoing <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.closedErr()
	}
	defer func() { <-c.outgoing }()

	out := proto.Clone(req).(*Request)
	out.Id = c.nextID.Add(1)
	p := pendingRequest{resp: make(chan *Response, 1), size: out.GetSize()}
	c.mu.Lock()
	c.pending[out.Id] = p
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, out.Id)
		c.mu.Unlock()
	}()

	if err := c.send(ctx, out); err != nil {
		return nil, err
	}
	select {
	case resp := <-p.resp:
		if err := errorOf(resp.GetCode()); err != nil {
			return nil, fmt.Errorf("requesting %q at %d: %w", out.GetName(), out.GetOffset(), err)
		}
		if len(resp.GetData()) > int(p.size) {
			return nil, fmt.Errorf("%w: answer of %d bytes to a request for %d", ErrMalformed, len(resp.GetData()), p.size)
		}
		return resp.GetData(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.closedErr()
	}
}

// Close sends the peer a Close with reason, after the messages already
// queued, and ends the connection: Serve returns ErrClosed. It waits until
// the Close frame is written, the connection ends otherwise, or Timeout
// passes (at most 10 s; then it ends the connection without the Close, as
// it does when Serve never runs). It returns an error wrapping ErrClosed if
// the connection had already ended, and ErrFrameTooLarge, after ending
// the connection, for a reason too long to send.
func (c *Conn) Close(reason string) error {
	select {
	case <-c.done:
		return c.closedErr()
	default:
	}
	c.closing.Store(true)
	frame, err := appendFrame(nil, &Close{Reason: reason})
	if err != nil {
		c.fail(ErrClosed)
		return err
	}
	timer := time.NewTimer(min(c.opts.Timeout, maxCloseWait))
	defer timer.Stop()
	select {
	case c.outbox <- outFrame{data: frame, last: true}:
	case <-c.done:
		return nil
	case <-timer.C:
		c.fail(ErrClosed)
		return nil
	}
	select {
	case <-c.done:
	case <-timer.C:
		c.fail(ErrClosed)
	}
	return nil
}

// send encodes msg and queues it for the writer.
func (c *Conn) send(ctx context.Context, msg proto.Message) error {
	frame, err := encodeFrame(msg)
	if err != nil {
		return err
	}
	if err := c.enqueue(ctx, outFrame{data: frame, pooled: true}); err != nil {
		putBuf(frame)
		return err
	}
	return nil
}

// enqueue hands f to the writer, unless the connection or ctx ends first.
func (c *Conn) enqueue(ctx context.Context, f outFrame) error {
	select {
	case <-c.done:
		return c.closedErr()
	default:
	}
	select {
	case c.outbox <- f:
		return nil
	case <-c.done:
		return c.closedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fail ends the connection with err, the first time it is called, and
// closes rw so the reader and writer stop.
func (c *Conn) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		close(c.done)
		_ = c.rw.Close()
	})
}

// closedErr is the error methods return once the connection has ended.
func (c *Conn) closedErr() error {
	<-c.done
	if errors.Is(c.err, ErrClosed) {
		return c.err
	}
	return fmt.Errorf("%w: %w", ErrClosed, c.err)
}
