package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/test/testutil"
)

func TestConnMessagesInOrder(t *testing.T) {
	a, b := pipePair(t, Options{})
	ctx := context.Background()
	var sent []proto.Message
	for i := range 50 {
		var err error
		switch i % 3 {
		case 0:
			cc := &ClusterConfig{Folders: []*Folder{{Id: fmt.Sprint("f", i), Type: FolderType_FOLDER_TYPE_SEND_ONLY}}}
			sent, err = append(sent, cc), a.conn.ClusterConfig(ctx, cc)
		case 1:
			idx := &Index{Folder: "f", Files: []*FileInfo{testFile(i, i)}}
			sent, err = append(sent, idx), a.conn.Index(ctx, idx)
		case 2:
			upd := &IndexUpdate{Folder: "f", Files: []*FileInfo{testFile(i, 1), testFile(i+1, 0)}}
			sent, err = append(sent, upd), a.conn.IndexUpdate(ctx, upd)
		}
		if err != nil {
			t.Fatalf("sending message %d: %v", i, err)
		}
	}
	for i, want := range sent {
		if got := b.model.next(t); !proto.Equal(got, want) {
			t.Fatalf("message %d:\n got %v\nwant %v", i, got, want)
		}
	}
	if len(a.model.messages) != 0 {
		t.Fatalf("sender's model got %d messages", len(a.model.messages))
	}
}

func TestConnSealedIndex(t *testing.T) {
	a, b := pipePair(t, Options{})
	idx := &SealedIndex{Folder: "f", Records: []*SealedRecord{{
		Sequence: 7, Origin: bytes.Repeat([]byte{1}, DeviceIDSize), Counter: 7,
		FileKey: bytes.Repeat([]byte{2}, HashSize), Sealed: []byte("ciphertext"),
		Chunks: [][]byte{bytes.Repeat([]byte{3}, HashSize)}, StoredNs: 42,
	}}}
	if err := a.conn.SealedIndex(context.Background(), idx); err != nil {
		t.Fatal(err)
	}
	if got := b.model.next(t); !proto.Equal(got, idx) {
		t.Fatalf("got %v, want %v", got, idx)
	}
	ack := &SealedAck{Folder: "f", Sequence: 7}
	if err := b.conn.SealedAck(context.Background(), ack); err != nil {
		t.Fatal(err)
	}
	if got := a.model.next(t); !proto.Equal(got, ack) {
		t.Fatalf("got %v, want %v", got, ack)
	}
}

func TestConnSealedIndexWithoutSealedModel(t *testing.T) {
	// A trusted-only model must not be handed sealed records: the frame is
	// malformed for it, and the connection ends.
	frame, err := appendFrame(nil, &SealedIndex{Folder: "f"})
	if err != nil {
		t.Fatal(err)
	}
	if err := serveFrame(t, plainModel{newRecordingModel()}, frame); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Serve: %v, want ErrMalformed", err)
	}
}

// serveFrame serves a connection with model m, sends it frame, and
// returns the error Serve ended with.
func serveFrame(t *testing.T, m Model, frame []byte) error {
	t.Helper()
	ca, cb := net.Pipe()
	defer cb.Close()
	go io.Copy(io.Discard, cb)
	c := NewConn(DeviceID{'r'}, ca, m, Options{})
	errc := make(chan error, 1)
	go func() { errc <- c.Serve(context.Background()) }()
	_, _ = cb.Write(frame)
	select {
	case err := <-errc:
		return err
	case <-time.After(waitLimit):
		t.Fatal("Serve did not end")
		return nil
	}
}

func TestConnRequestResponse(t *testing.T) {
	a, b := pipePair(t, Options{})
	b.model.answer = func(_ context.Context, req *Request) ([]byte, error) {
		if req.GetFolder() != "docs" || req.GetOffset() != 1<<33 || !bytes.Equal(req.GetHash(), testHash(3)) || !req.GetFromTemporary() {
			return nil, fmt.Errorf("unexpected request %v", req)
		}
		return bytes.Repeat([]byte{'x'}, int(req.GetSize())), nil
	}
	req := &Request{Id: 12345, Folder: "docs", Name: "a.txt", Offset: 1 << 33, Size: 256 << 10, Hash: testHash(3), FromTemporary: true}
	data, err := a.conn.Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 256<<10 || data[0] != 'x' {
		t.Fatalf("got %d bytes", len(data))
	}
	if req.GetId() != 12345 {
		t.Fatalf("Request modified the caller's request ID to %d", req.GetId())
	}
	// Both directions at once.
	if data, err := b.conn.Request(context.Background(), &Request{Name: "back", Size: 10}); err != nil || string(data) != "back" {
		t.Fatalf("reverse request: %q, %v", data, err)
	}
}

func TestConnManyConcurrentRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"defaults", Options{}},
		{"all 200 in flight", Options{MaxOutgoingRequests: 256, MaxIncomingRequests: 256}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pipePair(t, tc.opts)
			release := make(chan struct{})
			b.model.answer = func(ctx context.Context, req *Request) ([]byte, error) {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return fmt.Appendf(nil, "%s@%d", req.GetName(), req.GetOffset()), nil
			}
			const n = 200
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					name := fmt.Sprintf("file-%d", i)
					data, err := a.conn.Request(context.Background(), &Request{Name: name, Offset: int64(i), Size: 64})
					if err == nil && string(data) != fmt.Sprintf("%s@%d", name, i) {
						err = fmt.Errorf("request %d got %q", i, data)
					}
					errs <- err
				})
			}
			limit := min(tc.opts.withDefaults().MaxIncomingRequests, tc.opts.withDefaults().MaxOutgoingRequests, n)
			testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d requests handled at once", limit), func() bool {
				return b.model.active.Load() >= int32(limit)
			})
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := b.model.maxActive.Load(); got != int32(limit) {
				t.Fatalf("%d requests handled at once, want %d", got, limit)
			}
		})
	}
}

func TestConnRequestCancel(t *testing.T) {
	a, b := pipePair(t, Options{})
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	b.model.answer = func(_ context.Context, req *Request) ([]byte, error) {
		if req.GetName() == "slow" {
			started <- struct{}{}
			<-release
		}
		return []byte(req.GetName()), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := a.conn.Request(ctx, &Request{Name: "slow", Size: 10})
		errc <- err
	}()
	<-started
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled request: %v, want context.Canceled", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("cancelling did not abandon the wait")
	}
	// The late answer is dropped; the connection goes on.
	close(release)
	for i := range 3 {
		name := fmt.Sprint("fast", i)
		if data, err := a.conn.Request(context.Background(), &Request{Name: name, Size: 10}); err != nil || string(data) != name {
			t.Fatalf("request after a cancelled one: %q, %v", data, err)
		}
	}
	a.conn.mu.Lock()
	left := len(a.conn.pending)
	a.conn.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d requests still pending", left)
	}
}

func TestConnRequestErrors(t *testing.T) {
	a, b := pipePair(t, Options{})
	b.model.answer = func(_ context.Context, req *Request) ([]byte, error) {
		switch req.GetName() {
		case "missing":
			return nil, fmt.Errorf("opening: %w", ErrNoSuchFile)
		case "gone":
			return nil, &fs.PathError{Op: "open", Path: "gone", Err: fs.ErrNotExist}
		case "invalid":
			return []byte("ignored"), ErrInvalidFile
		case "too long":
			return make([]byte, req.GetSize()+1), nil
		case "exact":
			return make([]byte, req.GetSize()), nil
		case "short":
			return make([]byte, req.GetSize()-1), nil
		default:
			return nil, errors.New("disk on fire")
		}
	}
	for name, want := range map[string]error{
		"missing": ErrNoSuchFile, "gone": ErrNoSuchFile, "invalid": ErrInvalidFile,
		"broken": ErrRequestFailed, "too long": ErrRequestFailed, "exact": nil, "short": nil,
	} {
		data, err := a.conn.Request(context.Background(), &Request{Name: name, Size: 100})
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("request %q: %v, want %v", name, err, want)
		}
		if err != nil && data != nil {
			t.Errorf("request %q: data %q with error", name, data)
		}
	}
}

func TestConnResponseLongerThanRequested(t *testing.T) {
	s, p := newRawPeer(t, Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := s.conn.Request(context.Background(), &Request{Name: "x", Size: 4})
		errc <- err
	}()
	// Request IDs start at 1.
	testutil.Eventually(t, 10*time.Second, "request 1 to be pending", func() bool {
		s.conn.mu.Lock()
		defer s.conn.mu.Unlock()
		_, ok := s.conn.pending[1]
		return ok
	})
	frame, err := appendFrame(nil, &Response{Id: 1, Data: []byte("12345")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.write(frame); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrMalformed) {
		t.Fatalf("answer longer than asked: %v, want ErrMalformed", err)
	}
}

func TestConnClose(t *testing.T) {
	a, b := pipePair(t, Options{})
	// Queued messages go out before the Close.
	if err := a.conn.IndexUpdate(context.Background(), &IndexUpdate{Folder: "last words"}); err != nil {
		t.Fatal(err)
	}
	if err := a.conn.Close("shutting down"); err != nil {
		t.Fatal(err)
	}
	if err := a.wait(t); !errors.Is(err, ErrClosed) {
		t.Fatalf("closing side's Serve: %v, want ErrClosed", err)
	}
	err := b.wait(t)
	if !errors.Is(err, ErrPeerClosed) || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("peer's Serve: %v, want ErrPeerClosed with the reason", err)
	}
	if got := b.model.next(t); got.(*IndexUpdate).GetFolder() != "last words" {
		t.Fatalf("message before Close: %v", got)
	}
	a.checkClosedOnce(t)
	b.checkClosedOnce(t)

	// Everything fails once closed.
	ctx := context.Background()
	if err := a.conn.Close("again"); !isClosedErr(err) {
		t.Errorf("second Close: %v", err)
	}
	if err := a.conn.Index(ctx, &Index{}); !isClosedErr(err) {
		t.Errorf("Index after close: %v", err)
	}
	if _, err := b.conn.Request(ctx, &Request{}); !isClosedErr(err) || !errors.Is(err, ErrPeerClosed) {
		t.Errorf("Request after the peer closed: %v, want ErrClosed and ErrPeerClosed", err)
	}
	if err := b.conn.Serve(ctx); err == nil {
		t.Error("second Serve succeeded")
	}
}

func TestConnCloseBeforeServe(t *testing.T) {
	ca, cb := net.Pipe()
	defer cb.Close()
	c := NewConn(DeviceID{}, ca, newRecordingModel(), Options{Timeout: 50 * time.Millisecond})
	if err := c.Close("never mind"); err != nil {
		t.Fatal(err)
	}
	m := newRecordingModel()
	c.model = m
	if err := c.Serve(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v, want ErrClosed", err)
	}
	if m.nClosed.Load() != 1 {
		t.Fatalf("Model.Closed called %d times", m.nClosed.Load())
	}
}

func TestConnServeContextCancel(t *testing.T) {
	a, b := pipePair(t, Options{})
	release := make(chan struct{})
	b.model.answer = func(ctx context.Context, _ *Request) ([]byte, error) {
		close(release)
		<-ctx.Done() // a handler sees the connection end
		return nil, ctx.Err()
	}
	errc := make(chan error, 1)
	go func() {
		_, err := a.conn.Request(context.Background(), &Request{Size: 1})
		errc <- err
	}()
	<-release
	b.cancel()
	if err := b.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve after cancel: %v", err)
	}
	b.checkClosedOnce(t)
	if err := <-errc; !isClosedErr(err) {
		t.Fatalf("request in flight when the peer went away: %v", err)
	}
}

func TestConnModelErrorEndsConnection(t *testing.T) {
	a, b := pipePair(t, Options{})
	b.model.indexErr = errors.New("unknown folder")
	if err := a.conn.Index(context.Background(), &Index{Folder: "nope"}); err != nil {
		t.Fatal(err)
	}
	if err := b.wait(t); err == nil || !strings.Contains(err.Error(), "unknown folder") {
		t.Fatalf("Serve: %v, want the model's error", err)
	}
	b.checkClosedOnce(t)
	if err := a.wait(t); err == nil {
		t.Fatal("peer's Serve returned nil")
	}
	a.checkClosedOnce(t)
}

func TestConnMalformedFrames(t *testing.T) {
	cases := malformedFrames(t)
	cases["hello after hello"] = rawFrame(MessageType_MESSAGE_TYPE_HELLO, 0, nil)
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			s, p := newRawPeer(t, Options{})
			// A valid frame first: the connection was working.
			ping, _ := appendFrame(nil, &Ping{})
			if err := p.write(ping); err != nil {
				t.Fatal(err)
			}
			_ = p.write(frame) // may fail part-way once the Conn gives up
			if err := s.wait(t); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Serve: %v, want ErrMalformed", err)
			}
			s.checkClosedOnce(t)
		})
	}
}

func TestConnPeerClosesMidFrame(t *testing.T) {
	frame := closeFrame(t, 1000)
	for _, cut := range []int{0, 3, headerSize, headerSize + 500} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			s, p := newRawPeer(t, Options{})
			if err := p.write(frame[:cut]); err != nil {
				t.Fatal(err)
			}
			_ = p.conn.Close()
			err := s.wait(t)
			want := io.ErrUnexpectedEOF
			if cut == 0 {
				want = io.EOF
			}
			if !errors.Is(err, want) || errors.Is(err, ErrMalformed) {
				t.Fatalf("Serve: %v, want %v", err, want)
			}
			s.checkClosedOnce(t)
		})
	}
}

func TestConnPingKeepsIdleConnectionAlive(t *testing.T) {
	opts := Options{PingInterval: 20 * time.Millisecond, Timeout: 600 * time.Millisecond}
	a, b := pipePair(t, opts)
	time.Sleep(4 * opts.Timeout) // idle for four timeouts: only the pings keep it up
	for _, s := range []*served{a, b} {
		if s.ended() {
			t.Fatalf("idle connection ended: %v", s.wait(t))
		}
	}
	if data, err := a.conn.Request(context.Background(), &Request{Name: "alive", Size: 5}); err != nil || string(data) != "alive" {
		t.Fatalf("request after idling: %q, %v", data, err)
	}
}

func TestConnSilentPeerTimesOut(t *testing.T) {
	opts := Options{PingInterval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond}
	s, _ := newRawPeer(t, opts) // reads everything, sends nothing
	start := time.Now()
	err := s.wait(t)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "nothing received") {
		t.Fatalf("Serve: %v, want ErrTimeout for silence", err)
	}
	if waited := time.Since(start); waited < opts.Timeout {
		t.Fatalf("timed out after %v, before Timeout %v", waited, opts.Timeout)
	}
	s.checkClosedOnce(t)
}

func TestConnPeerNotReadingTimesOut(t *testing.T) {
	opts := Options{PingInterval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond}
	ca, cb := net.Pipe()
	s := serve(t, DeviceID{}, ca, newRecordingModel(), opts)
	// The peer keeps sending Pings but never reads.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ping, _ := appendFrame(nil, &Ping{})
		for {
			select {
			case <-stop:
				return
			case <-time.After(opts.PingInterval):
				if _, err := cb.Write(ping); err != nil {
					return
				}
			}
		}
	}()
	err := s.wait(t)
	close(stop)
	<-done
	_ = cb.Close()
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "write") {
		t.Fatalf("Serve: %v, want ErrTimeout for a blocked write", err)
	}
	s.checkClosedOnce(t)
}

func TestConnReceiverClaims(t *testing.T) {
	a, b := pipePair(t, Options{})
	rc := &ReceiverClaims{Claims: []*ReceiverClaim{testClaim(1), testClaim(2)}}
	if err := a.conn.ReceiverClaims(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	if got := b.model.next(t); !proto.Equal(got, rc) {
		t.Fatalf("got %v, want %v", got, rc)
	}
	// Boundaries: MaxReceiverClaims claims go, one more is refused before
	// anything is sent.
	full := &ReceiverClaims{}
	for range MaxReceiverClaims {
		full.Claims = append(full.Claims, testClaim(1))
	}
	if err := a.conn.ReceiverClaims(context.Background(), full); err != nil {
		t.Fatalf("%d claims: %v", MaxReceiverClaims, err)
	}
	if got := b.model.next(t).(*ReceiverClaims); len(got.GetClaims()) != MaxReceiverClaims {
		t.Fatalf("got %d claims", len(got.GetClaims()))
	}
	full.Claims = append(full.Claims, testClaim(1))
	if err := a.conn.ReceiverClaims(context.Background(), full); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%d claims: %v, want ErrMalformed", MaxReceiverClaims+1, err)
	}
}

func TestClaimBoundaries(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*ReceiverClaim)
		ok   bool
	}{
		{"sequence 0", func(c *ReceiverClaim) { c.Sequence = 0 }, false},
		{"sequence 1", func(c *ReceiverClaim) { c.Sequence = 1 }, true},
		{"sequence 2", func(c *ReceiverClaim) { c.Sequence = 2 }, true},
		{"counter 0", func(c *ReceiverClaim) { c.Counter = 0 }, false},
		{"counter 1", func(c *ReceiverClaim) { c.Counter = 1 }, true},
		{"receiver 31 bytes", func(c *ReceiverClaim) { c.Receiver = c.Receiver[:31] }, false},
		{"receiver 33 bytes", func(c *ReceiverClaim) { c.Receiver = append(c.Receiver, 1) }, false},
		{"origin 31 bytes", func(c *ReceiverClaim) { c.Origin = c.Origin[:31] }, false},
		{"log ID 0", func(c *ReceiverClaim) { c.LogId = 0 }, false},
		{"log ID 1", func(c *ReceiverClaim) { c.LogId = 1 }, true},
	} {
		c := testClaim(1)
		tc.edit(c)
		var buf bytes.Buffer
		err := WriteMessage(&buf, &ReceiverClaims{Claims: []*ReceiverClaim{c}})
		if tc.ok != (err == nil) {
			t.Errorf("%s: WriteMessage = %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", tc.name, err)
		}
	}
}

func TestConnReceiverClaimsWithoutClaimsModel(t *testing.T) {
	// A model that does not take claims (a receiver) ends the connection
	// on one, as on any malformed frame.
	frame, err := appendFrame(nil, &ReceiverClaims{Claims: []*ReceiverClaim{testClaim(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := serveFrame(t, plainModel{newRecordingModel()}, frame); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Serve: %v, want ErrMalformed", err)
	}
}

func TestConnMalformedClaimsEndConnection(t *testing.T) {
	// A claims frame breaking a rule ends the connection with ErrMalformed
	// and never reaches the model.
	m := newRecordingModel()
	bad := testClaim(1)
	bad.Sequence = 0
	body, err := proto.Marshal(&ReceiverClaims{Claims: []*ReceiverClaim{bad}})
	if err != nil {
		t.Fatal(err)
	}
	if err := serveFrame(t, m, rawFrame(MessageType_MESSAGE_TYPE_RECEIVER_CLAIMS, 0, body)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Serve: %v, want ErrMalformed", err)
	}
	if len(m.messages) != 0 {
		t.Fatalf("the model got %d messages", len(m.messages))
	}
}

// holdingConn keeps what is written between Hold and Flush to itself, as
// a BatchConn in sync/connections does, and counts the batches.
type holdingConn struct {
	net.Conn
	mu      sync.Mutex
	held    bool
	buf     bytes.Buffer
	batches int
}

func (c *holdingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held {
		return c.buf.Write(p)
	}
	return c.Conn.Write(p)
}

func (c *holdingConn) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = true
}

func (c *holdingConn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
	c.batches++
	_, err := c.buf.WriteTo(c.Conn)
	return err
}

// TestConnFlushesHeldWrites: over a stream that holds writes back, every
// batch the writer starts it also flushes, or nothing would arrive.
func TestConnFlushesHeldWrites(t *testing.T) {
	ca, cb := net.Pipe()
	ha, hb := &holdingConn{Conn: ca}, &holdingConn{Conn: cb}
	a, b := pairOver(t, ha, hb, Options{})
	b.model.answer = func(_ context.Context, req *Request) ([]byte, error) {
		return bytes.Repeat([]byte{'y'}, int(req.GetSize())), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 5 {
		idx := &Index{Folder: "f", Files: []*FileInfo{testFile(i, i)}}
		if err := a.conn.Index(ctx, idx); err != nil {
			t.Fatal(err)
		}
		if got := b.model.next(t); !proto.Equal(got, idx) {
			t.Fatalf("got %v, want %v", got, idx)
		}
		data, err := a.conn.Request(ctx, &Request{Name: "x", Size: 300 << 10})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if len(data) != 300<<10 {
			t.Fatalf("got %d bytes", len(data))
		}
	}
	ha.mu.Lock()
	hb.mu.Lock()
	defer ha.mu.Unlock()
	defer hb.mu.Unlock()
	if ha.batches == 0 || hb.batches == 0 {
		t.Fatalf("batches %d and %d: the writers did not hold their writes", ha.batches, hb.batches)
	}
}
