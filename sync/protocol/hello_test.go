package protocol

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

type helloResult struct {
	hello *Hello
	err   error
}

// exchangeBoth runs ExchangeHello on both ends at once.
func exchangeBoth(ctx context.Context, ca, cb io.ReadWriter, ha, hb *Hello) (ra, rb helloResult) {
	done := make(chan helloResult, 1)
	go func() {
		h, err := ExchangeHello(ctx, cb, hb)
		done <- helloResult{h, err}
	}()
	h, err := ExchangeHello(ctx, ca, ha)
	return helloResult{h, err}, <-done
}

func TestExchangeHello(t *testing.T) {
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	ha := &Hello{DeviceName: "laptop", ClientName: "lockstep", ClientVersion: "v1"}
	hb := &Hello{DeviceName: "desktop", ClientName: "lockstep", ClientVersion: "v2", ProtocolVersion: 99}
	ra, rb := exchangeBoth(context.Background(), ca, cb, ha, hb)
	if ra.err != nil || rb.err != nil {
		t.Fatalf("exchange: %v / %v", ra.err, rb.err)
	}
	wantA := &Hello{DeviceName: "desktop", ClientName: "lockstep", ClientVersion: "v2", ProtocolVersion: ProtocolVersion}
	if !proto.Equal(ra.hello, wantA) {
		t.Fatalf("a got %v, want %v", ra.hello, wantA)
	}
	if rb.hello.GetDeviceName() != "laptop" || rb.hello.GetProtocolVersion() != ProtocolVersion {
		t.Fatalf("b got %v", rb.hello)
	}
	if hb.GetProtocolVersion() != 99 {
		t.Fatal("ExchangeHello modified the caller's Hello")
	}
	// The deadline set for the exchange is cleared: the connection serves on.
	a, b := pairOver(t, ca, cb, Options{})
	if data, err := a.conn.Request(context.Background(), &Request{Name: "after hello", Size: 20}); err != nil || string(data) != "after hello" {
		t.Fatalf("request after hello: %q, %v", data, err)
	}
	_ = b
}

func TestExchangeHelloVersionMismatch(t *testing.T) {
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	done := make(chan error, 1)
	go func() {
		// A peer of another protocol version, speaking raw frames.
		if err := WriteMessage(cb, &Hello{DeviceName: "future", ProtocolVersion: ProtocolVersion + 1}); err != nil {
			done <- err
			return
		}
		_, err := ReadMessage(cb)
		done <- err
	}()
	peer, err := ExchangeHello(context.Background(), ca, &Hello{})
	if !errors.Is(err, ErrProtocolVersion) {
		t.Fatalf("ExchangeHello: %v, want ErrProtocolVersion", err)
	}
	if peer.GetDeviceName() != "future" {
		t.Fatalf("peer hello %v", peer)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestExchangeHelloWrongFirstMessage(t *testing.T) {
	for name, first := range map[string][]byte{
		"ping":      rawFrame(MessageType_MESSAGE_TYPE_PING, 0, nil),
		"garbage":   []byte("GET / HTTP/1.1\r\n\r\n"),
		"too large": rawFrame(MessageType_MESSAGE_TYPE_HELLO, 0, make([]byte, maxHelloFrame)),
	} {
		t.Run(name, func(t *testing.T) {
			ca, cb := net.Pipe()
			defer ca.Close()
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				_, _ = cb.Write(first)
				_, _ = io.Copy(io.Discard, cb)
			}()
			_, err := ExchangeHello(context.Background(), ca, &Hello{})
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ExchangeHello: %v, want ErrMalformed", err)
			}
			_ = cb.Close()
			<-drained
		})
	}
}

func TestExchangeHelloTimeout(t *testing.T) {
	// A peer that reads our Hello but never answers.
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, cb)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := ExchangeHello(ctx, ca, &Hello{})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("silent peer: %v, want ErrTimeout", err)
	}
	_ = cb.Close()
	<-drained

	// A peer that neither reads nor writes: the write is abandoned too.
	cc, cd := net.Pipe()
	defer cc.Close()
	defer cd.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := ExchangeHello(ctx2, cc, &Hello{}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("stuck peer: %v, want ErrTimeout", err)
	}
}

// plainStream is a connection without deadlines.
type plainStream struct {
	io.Reader
	io.Writer
	closed chan struct{}
	closer io.Closer
}

func (p *plainStream) Close() error {
	close(p.closed)
	return p.closer.Close()
}

func TestExchangeHelloCancelClosesPlainStream(t *testing.T) {
	r, w := io.Pipe() // we read r; nobody ever writes w
	s := &plainStream{Reader: r, Writer: io.Discard, closed: make(chan struct{}), closer: r}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Give the exchange time to block in its read (nothing shows
		// that it has), so the cancel ends a read under way.
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	_, err := ExchangeHello(ctx, s, &Hello{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled exchange: %v, want context.Canceled", err)
	}
	select {
	case <-s.closed:
	default:
		t.Fatal("stream without deadlines was not closed")
	}
	_ = w.Close()
}
