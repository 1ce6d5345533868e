package protocol

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// waitLimit bounds every wait for something that should happen; generous
// for slow machines and the race detector.
const waitLimit = time.Minute

// ended reports whether Serve has returned, without waiting.
func (s *served) ended() bool {
	select {
	case err := <-s.errc:
		s.once.Do(func() { s.err = err })
		return true
	default:
		return false
	}
}

// recordingModel records what a Conn hands it. Its Request answers with
// the bytes of answer, or blocks in block when set.
type recordingModel struct {
	messages chan proto.Message // ClusterConfig, Index, IndexUpdate in order
	closed   chan error
	nClosed  atomic.Int32

	indexErr error // returned from Index

	answer func(ctx context.Context, req *Request) ([]byte, error)

	active    atomic.Int32 // Request calls running
	maxActive atomic.Int32
}

func newRecordingModel() *recordingModel {
	return &recordingModel{
		messages: make(chan proto.Message, 1000),
		closed:   make(chan error, 10),
		answer: func(_ context.Context, req *Request) ([]byte, error) {
			return []byte(req.GetName()), nil
		},
	}
}

func (m *recordingModel) ClusterConfig(_ DeviceID, cc *ClusterConfig) error {
	m.messages <- cc
	return nil
}

func (m *recordingModel) Index(_ DeviceID, idx *Index) error {
	m.messages <- idx
	return m.indexErr
}

func (m *recordingModel) IndexUpdate(_ DeviceID, idx *IndexUpdate) error {
	m.messages <- idx
	return nil
}

func (m *recordingModel) SealedIndex(_ DeviceID, idx *SealedIndex) error {
	m.messages <- idx
	return nil
}

func (m *recordingModel) SealedAck(_ DeviceID, ack *SealedAck) error {
	m.messages <- ack
	return nil
}

func (m *recordingModel) ReceiverClaims(_ DeviceID, rc *ReceiverClaims) error {
	m.messages <- rc
	return nil
}

// plainModel hides every ability of a model beyond Model itself.
type plainModel struct{ Model }

func (m *recordingModel) Request(ctx context.Context, _ DeviceID, req *Request) ([]byte, error) {
	n := m.active.Add(1)
	defer m.active.Add(-1)
	for {
		old := m.maxActive.Load()
		if n <= old || m.maxActive.CompareAndSwap(old, n) {
			break
		}
	}
	return m.answer(ctx, req)
}

func (m *recordingModel) Closed(_ DeviceID, err error) {
	m.nClosed.Add(1)
	m.closed <- err
}

// next returns the next in-order message the model received.
func (m *recordingModel) next(t *testing.T) proto.Message {
	t.Helper()
	select {
	case msg := <-m.messages:
		return msg
	case <-time.After(waitLimit):
		t.Fatal("no message reached the model")
		return nil
	}
}

// served is a Conn running Serve in the background.
type served struct {
	conn   *Conn
	model  *recordingModel
	cancel context.CancelFunc // cancels Serve's context
	errc   chan error
	err    error
	once   sync.Once
}

// wait returns Serve's error, failing the test if it takes too long.
func (s *served) wait(t *testing.T) error {
	t.Helper()
	s.once.Do(func() {
		select {
		case s.err = <-s.errc:
		case <-time.After(waitLimit):
			t.Fatal("Serve did not return")
		}
	})
	return s.err
}

// checkClosedOnce checks Model.Closed ran exactly once, with Serve's error.
func (s *served) checkClosedOnce(t *testing.T) {
	t.Helper()
	err := s.wait(t)
	if n := s.model.nClosed.Load(); n != 1 {
		t.Fatalf("Model.Closed called %d times, want 1", n)
	}
	if got := <-s.model.closed; got != err {
		t.Fatalf("Model.Closed got %v, Serve returned %v", got, err)
	}
}

// serve starts c's Serve; the test's cleanup cancels it and waits.
func serve(t *testing.T, peer DeviceID, rw net.Conn, m *recordingModel, opts Options) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{conn: NewConn(peer, rw, m, opts), model: m, cancel: cancel, errc: make(chan error, 1)}
	go func() { s.errc <- s.conn.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		s.wait(t)
	})
	return s
}

// pipePair connects two served Conns over net.Pipe.
func pipePair(t *testing.T, opts Options) (a, b *served) {
	t.Helper()
	ca, cb := net.Pipe()
	return pairOver(t, ca, cb, opts)
}

// pairOver serves two Conns over the two ends of a connection.
func pairOver(t *testing.T, ca, cb net.Conn, opts Options) (a, b *served) {
	t.Helper()
	a = serve(t, DeviceID{'b'}, ca, newRecordingModel(), opts)
	b = serve(t, DeviceID{'a'}, cb, newRecordingModel(), opts)
	return a, b
}

// rawPeer is the far end of a served Conn, driven byte by byte. It drains
// whatever the Conn writes, so the Conn's writer never blocks.
type rawPeer struct {
	conn    net.Conn
	drained chan struct{}
}

func newRawPeer(t *testing.T, opts Options) (*served, *rawPeer) {
	t.Helper()
	ca, cb := net.Pipe()
	s := serve(t, DeviceID{'r'}, ca, newRecordingModel(), opts)
	p := &rawPeer{conn: cb, drained: make(chan struct{})}
	go func() {
		defer close(p.drained)
		buf := make([]byte, 32<<10)
		for {
			if _, err := cb.Read(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cb.Close()
		<-p.drained
	})
	return s, p
}

// write sends raw bytes; errors are expected once the Conn has closed.
func (p *rawPeer) write(b []byte) error {
	_, err := p.conn.Write(b)
	return err
}

// isClosedErr reports whether err says the connection ended.
func isClosedErr(err error) bool {
	return errors.Is(err, ErrClosed)
}
