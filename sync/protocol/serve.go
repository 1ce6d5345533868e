package protocol

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// writeBuffer is the writer's buffer: small frames sent together leave in
// one write.
const writeBuffer = 64 << 10

// errServed is returned by a second call to Serve.
var errServed = errors.New("protocol: Serve called twice")

// Serve runs the connection: a reader that hands messages to the Model, a
// writer that sends queued frames and Pings, a watchdog for Timeout, and a
// goroutine per request being answered. It returns when ctx ends (with
// ctx's error), Close is called (ErrClosed), the peer says Close
// (ErrPeerClosed), the peer is silent too long (ErrTimeout), sends a
// malformed frame (ErrMalformed), or the stream fails; by then rw is
// closed, every goroutine it started has ended, and Model.Closed has been
// called once with the same error. If a Model call is running, Serve waits
// for it. Serve may be called once.
func (c *Conn) Serve(ctx context.Context) error {
	if !c.served.CompareAndSwap(false, true) {
		return errServed
	}
	now := time.Now().UnixNano()
	c.lastRecv.Store(now)
	c.lastSend.Store(now)

	handlerCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.readLoop(handlerCtx, &wg) })
	wg.Go(c.writeLoop)
	wg.Go(c.watchdog)

	select {
	case <-ctx.Done():
		c.fail(ctx.Err())
	case <-c.done:
	}
	cancel()
	wg.Wait()
	c.dropUnsent()
	c.model.Closed(c.peer, c.err)
	return c.err
}

// dropUnsent gives back the buffers of the frames the writer left queued
// when the connection ended, the model's included: memory a model lent
// for an answer (Lend) is only ever freed by its release.
func (c *Conn) dropUnsent() {
	for {
		select {
		case f := <-c.outbox:
			if f.pooled {
				putBuf(f.data)
			}
			if f.release != nil {
				f.release()
			}
		default:
			return
		}
	}
}

// readLoop reads and dispatches frames until the connection ends. Request
// handlers it starts join wg.
func (c *Conn) readLoop(ctx context.Context, wg *sync.WaitGroup) {
	for {
		msg, err := ReadMessage(c.rw)
		if err != nil {
			c.failReading(fmt.Errorf("reading from peer: %w", err))
			return
		}
		c.lastRecv.Store(time.Now().UnixNano())
		if err := c.dispatch(ctx, msg, wg); err != nil {
			c.failReading(err)
			return
		}
	}
}

// failReading ends the connection for err from the reader, unless we are
// closing it ourselves: then the peer hanging up is the expected end.
func (c *Conn) failReading(err error) {
	if c.closing.Load() {
		err = ErrClosed
	}
	c.fail(err)
}

// dispatch acts on one message from the peer. An error ends the connection.
func (c *Conn) dispatch(ctx context.Context, msg proto.Message, wg *sync.WaitGroup) error {
	switch m := msg.(type) {
	case *ClusterConfig:
		return c.callModel("cluster config", func() error { return c.model.ClusterConfig(c.peer, m) })
	case *Index:
		return c.callModel("index", func() error { return c.model.Index(c.peer, m) })
	case *IndexUpdate:
		return c.callModel("index update", func() error { return c.model.IndexUpdate(c.peer, m) })
	case *Request:
		c.startRequest(ctx, m, wg)
	case *Response:
		c.deliver(m)
	case *Ping:
	case *Close:
		return fmt.Errorf("%w: %s", ErrPeerClosed, m.GetReason())
	case *SealedIndex:
		sm, ok := c.model.(SealedModel)
		if !ok {
			return fmt.Errorf("%w: sealed index, which this side does not take", ErrMalformed)
		}
		return c.callModel("sealed index", func() error { return sm.SealedIndex(c.peer, m) })
	case *SealedAck:
		sm, ok := c.model.(SealedModel)
		if !ok {
			return fmt.Errorf("%w: sealed ack, which this side does not take", ErrMalformed)
		}
		return c.callModel("sealed ack", func() error { return sm.SealedAck(c.peer, m) })
	case *ReceiverClaims:
		cm, ok := c.model.(ClaimsModel)
		if !ok {
			return fmt.Errorf("%w: receiver claims, which this side does not take", ErrMalformed)
		}
		return c.callModel("receiver claims", func() error { return cm.ReceiverClaims(c.peer, m) })
	default:
		return fmt.Errorf("%w: unexpected %v after hello", ErrMalformed, typeOf(msg).name())
	}
	return nil
}

// callModel runs one in-order Model call, with the receive timeout
// suspended.
func (c *Conn) callModel(what string, call func() error) error {
	c.inModel.Store(true)
	err := call()
	c.lastRecv.Store(time.Now().UnixNano())
	c.inModel.Store(false)
	if err != nil {
		return fmt.Errorf("handling %s: %w", what, err)
	}
	return nil
}

// startRequest answers req in a goroutine of its own, once a slot is free.
func (c *Conn) startRequest(ctx context.Context, req *Request, wg *sync.WaitGroup) {
	select {
	case c.incoming <- struct{}{}:
	case <-ctx.Done():
		return
	}
	wg.Go(func() {
		defer func() { <-c.incoming }()
		data, err := c.model.Request(ctx, c.peer, req)
		// Whatever becomes of the answer, its buffer goes back.
		release := func() {}
		if r, ok := c.model.(Releaser); ok && data != nil {
			release = func() { r.Release(data) }
		}
		if err == nil && len(data) > int(req.GetSize()) {
			err = fmt.Errorf("model answered %d bytes to a request for %d", len(data), req.GetSize())
		}
		if ctx.Err() != nil {
			release()
			return // the connection is ending; the answer would be lost
		}
		// The response can only fail to go out if the connection ends.
		if err == nil && len(data) >= streamResponseMin {
			c.sendData(ctx, req.GetId(), data, release)
			return
		}
		resp := &Response{Id: req.GetId(), Code: codeOf(err)}
		if err == nil {
			resp.Data = data
		}
		_ = c.send(ctx, resp)
		// send copied the data into its frame; the model may reuse it.
		release()
	})
}

// sendData queues a successful Response whose data the writer sends from
// the model's buffer; release runs once the buffer is no longer needed.
func (c *Conn) sendData(ctx context.Context, id int64, data []byte, release func()) {
	head, err := responseHead(id, len(data))
	if err != nil {
		// Too large to frame: an error answer instead, as send gives.
		release()
		_ = c.send(ctx, &Response{Id: id, Code: codeOf(err)})
		return
	}
	if err := c.enqueue(ctx, outFrame{data: head, pooled: true, tail: data, release: release}); err != nil {
		putBuf(head)
		release()
	}
}

// deliver hands resp to the request waiting for it. Answers nobody waits
// for any more (their request's context ended) are dropped.
func (c *Conn) deliver(resp *Response) {
	c.mu.Lock()
	p, ok := c.pending[resp.GetId()]
	delete(c.pending, resp.GetId())
	c.mu.Unlock()
	if ok {
		p.resp <- resp
	}
}

// writeLoop writes queued frames, and a Ping when nothing was sent for
// PingInterval, until the connection ends.
func (c *Conn) writeLoop() {
	bw := bufio.NewWriterSize(c.rw, writeBuffer)
	ping, err := appendFrame(nil, &Ping{})
	if err != nil {
		c.fail(err)
		return
	}
	timer := time.NewTimer(c.opts.PingInterval)
	defer timer.Stop()
	for {
		select {
		case f := <-c.outbox:
			last, err := c.writeQueued(bw, f)
			if err != nil {
				c.fail(fmt.Errorf("writing to peer: %w", err))
				return
			}
			if last {
				c.fail(ErrClosed)
				return
			}
		case <-timer.C:
			idle := time.Since(time.Unix(0, c.lastSend.Load()))
			if idle < c.opts.PingInterval {
				timer.Reset(c.opts.PingInterval - idle)
				continue
			}
			if _, err := c.writeQueued(bw, outFrame{data: ping}); err != nil {
				c.fail(fmt.Errorf("writing to peer: %w", err))
				return
			}
			timer.Reset(c.opts.PingInterval)
		case <-c.done:
			return
		}
	}
}

// A batcher is a stream that can hold written bytes back until Flush, so
// that a batch of frames reaches the socket in a few large system calls
// rather than one per TLS record.
type batcher interface {
	Hold()
	Flush() error
}

// writeQueued writes f and whatever else is queued, then flushes. It
// reports whether it wrote the last frame (a Close); frames behind that
// one are not written.
func (c *Conn) writeQueued(bw *bufio.Writer, f outFrame) (last bool, err error) {
	c.writeFrom.Store(time.Now().UnixNano())
	defer func() {
		now := time.Now().UnixNano()
		c.writeFrom.Store(0)
		c.lastSend.Store(now)
	}()
	b, ok := c.rw.(batcher)
	if !ok {
		return c.writeBatch(bw, f)
	}
	b.Hold()
	last, err = c.writeBatch(bw, f)
	if ferr := b.Flush(); err == nil {
		err = ferr
	}
	return last, err
}

// directTail is the size from which a frame's tail is written past bufio:
// a small file's block is copied, and its frame batched with others.
const directTail = 64 << 10

// writeBatch is writeQueued's loop.
func (c *Conn) writeBatch(bw *bufio.Writer, f outFrame) (last bool, err error) {
	for {
		_, err := bw.Write(f.data)
		if f.pooled {
			putBuf(f.data) // bufio copied it or wrote it through
		}
		switch {
		case f.tail != nil && len(f.tail) < directTail:
			if err == nil {
				_, err = bw.Write(f.tail)
			}
			f.release()
		case f.tail != nil:
			// Straight from the model's buffer, past bufio, which would
			// copy up to its size of it first.
			if err == nil {
				err = bw.Flush()
			}
			if err == nil {
				_, err = c.rw.Write(f.tail)
			}
			f.release()
		}
		if err != nil {
			return false, err
		}
		if f.last {
			return true, bw.Flush()
		}
		select {
		case f = <-c.outbox:
		default:
			return false, bw.Flush()
		}
	}
}

// watchdog ends the connection with ErrTimeout when nothing was received,
// or a write was blocked, for Timeout.
func (c *Conn) watchdog() {
	ticker := time.NewTicker(max(c.opts.Timeout/8, time.Millisecond))
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			now := time.Now()
			if !c.inModel.Load() {
				if idle := now.Sub(time.Unix(0, c.lastRecv.Load())); idle > c.opts.Timeout {
					c.fail(fmt.Errorf("%w: nothing received for %v", ErrTimeout, idle.Round(time.Millisecond)))
					return
				}
			}
			if from := c.writeFrom.Load(); from != 0 {
				if stuck := now.Sub(time.Unix(0, from)); stuck > c.opts.Timeout {
					c.fail(fmt.Errorf("%w: a write blocked for %v", ErrTimeout, stuck.Round(time.Millisecond)))
					return
				}
			}
		case <-c.done:
			return
		}
	}
}
