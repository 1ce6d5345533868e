package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"lockstep/crypt"
	"lockstep/sync/connections"
	"lockstep/sync/protocol"
)

// Session limits.
const (
	// dialTimeout bounds the TCP connect, the TLS handshake and the Hello.
	dialTimeout = 30 * time.Second
	// configTimeout bounds the wait for the receiver's ClusterConfig.
	configTimeout = 30 * time.Second
	// logStallTimeout is how long the receiver may send nothing of its log
	// before the recovery gives up on it.
	logStallTimeout = 2 * time.Minute
	// envelopeTimeout bounds the wait for the folder key envelope.
	envelopeTimeout = 30 * time.Second
	// sealedQueue is how many SealedIndex messages may wait to be
	// processed. A receiver keeps at most a few unacknowledged; one that
	// sends more than this breaks flow control.
	sealedQueue = 64
)

// errFlowControl: the receiver sent more SealedIndex messages than it may
// without their acknowledgement.
var errFlowControl = errors.New("receiver ignores flow control")

// session is the one connection to the receiver, and the Model the
// connection hands the receiver's messages to.
type session struct {
	opts   Options
	conn   *protocol.Conn
	cc     chan *protocol.ClusterConfig // the receiver's first ClusterConfig
	sealed chan *protocol.SealedIndex   // the folder's log, in order
	done   chan struct{}                // closed when Serve has returned
	err    error                        // Serve's result, set before done closes

	logStall, envelopeWait time.Duration // see logStallTimeout, envelopeTimeout
}

// connect dials the receiver, pins its key, exchanges Hellos and starts
// serving the connection. close ends it.
func connect(ctx context.Context, opts Options) (*session, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", opts.Address)
	if err != nil {
		return nil, fmt.Errorf("connecting to receiver: %w", err)
	}
	tc := connections.Client(raw, crypt.ClientTLSConfig(opts.Identity, opts.Receiver))
	if err := tc.HandshakeContext(dctx); err != nil {
		tc.Close()
		var unknown *crypt.UnknownDeviceError
		if errors.As(err, &unknown) {
			return nil, fmt.Errorf("the device at %s is %s, not receiver %s", opts.Address, unknown.ID, opts.Receiver)
		}
		return nil, fmt.Errorf("connecting to receiver: %w", err)
	}
	name := ""
	if opts.Identity.Leaf != nil {
		name = opts.Identity.Leaf.Subject.CommonName
	}
	_, err = protocol.ExchangeHello(dctx, tc, &protocol.Hello{DeviceName: name, ClientName: "lockstep", ClientVersion: opts.Version})
	if err != nil {
		tc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, protocol.ErrProtocolVersion) || errors.Is(err, protocol.ErrMalformed) || errors.Is(err, protocol.ErrTimeout) {
			return nil, fmt.Errorf("receiver %s: %w", opts.Receiver.Short(), err)
		}
		// In TLS 1.3 a server that refuses our certificate shows up here,
		// on the first read.
		return nil, fmt.Errorf("%w: receiver %s refused this device %s (add and accept it on the receiver, and share the folder with it): %w",
			ErrNotShared, opts.Receiver.Short(), opts.Identity.ID, err)
	}
	s := &session{
		opts:         opts,
		cc:           make(chan *protocol.ClusterConfig, 1),
		sealed:       make(chan *protocol.SealedIndex, sealedQueue),
		done:         make(chan struct{}),
		logStall:     cmp.Or(opts.logStall, logStallTimeout),
		envelopeWait: cmp.Or(opts.envelopeWait, envelopeTimeout),
	}
	s.conn = protocol.NewConn(protocol.DeviceID(opts.Receiver), tc, s, protocol.Options{})
	go func() {
		s.err = s.conn.Serve(ctx)
		close(s.done)
	}()
	return s, nil
}

// close says goodbye to the receiver and waits for the connection to end.
func (s *session) close(reason string) {
	_ = s.conn.Close(reason)
	<-s.done
}

// ended is the error for a connection that ended while we waited on it.
func (s *session) ended() error {
	<-s.done
	return fmt.Errorf("connection to receiver ended: %w", s.err)
}

// announce sends the folder with nothing held, waits for the receiver's
// ClusterConfig and returns the highest sequence of its log.
func (s *session) announce(ctx context.Context) (int64, error) {
	me, recv := s.opts.Identity.ID, s.opts.Receiver
	err := s.conn.ClusterConfig(ctx, &protocol.ClusterConfig{Folders: []*protocol.Folder{{
		Id:   s.opts.Folder,
		Type: protocol.FolderType_FOLDER_TYPE_SEND_RECEIVE,
		Devices: []*protocol.FolderDevice{
			{DeviceId: me[:]},
			{DeviceId: recv[:], Encrypted: true},
		},
	}}})
	if err != nil {
		return 0, fmt.Errorf("sending cluster config: %w", err)
	}
	timer := time.NewTimer(configTimeout)
	defer timer.Stop()
	var cc *protocol.ClusterConfig
	select {
	case cc = <-s.cc:
	case <-timer.C:
		return 0, fmt.Errorf("receiver %s sent no cluster config within %v", recv.Short(), configTimeout)
	case <-s.done:
		return 0, s.ended()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	for _, f := range cc.GetFolders() {
		if f.GetId() != s.opts.Folder {
			continue
		}
		for _, d := range f.GetDevices() {
			if string(d.GetDeviceId()) == string(recv[:]) {
				if !d.GetEncrypted() {
					return 0, fmt.Errorf("device %s shares folder %s as a trusted device, not as an encrypted receiver", recv.Short(), s.opts.Folder)
				}
				return max(d.GetMaxSequence(), 0), nil
			}
		}
		return 0, fmt.Errorf("receiver %s lists folder %s without itself", recv.Short(), s.opts.Folder)
	}
	return 0, fmt.Errorf("%w: receiver %s does not offer folder %s to this device %s (add this device on the receiver and share the folder with it)",
		ErrNotShared, recv.Short(), s.opts.Folder, me)
}

// folderKeys fetches the folder's envelope and opens it with password.
func (s *session) folderKeys(ctx context.Context, password []byte) (*crypt.Keys, error) {
	rctx, cancel := context.WithTimeout(ctx, s.envelopeWait)
	defer cancel()
	env, err := s.conn.Request(rctx, &protocol.Request{
		Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_GET, Folder: s.opts.Folder, Size: protocol.MaxEnvelopeSize,
	})
	switch {
	case errors.Is(err, protocol.ErrNoSuchFile):
		return nil, fmt.Errorf("%w: folder %s on receiver %s", ErrNoKey, s.opts.Folder, s.opts.Receiver.Short())
	case err != nil && ctx.Err() == nil && rctx.Err() != nil:
		return nil, fmt.Errorf("receiver %s did not send the folder key envelope within %v", s.opts.Receiver.Short(), s.envelopeWait)
	case err != nil:
		return nil, fmt.Errorf("fetching the folder key envelope: %w", err)
	}
	ring, err := crypt.OpenRing(env, password)
	switch {
	case errors.Is(err, crypt.ErrWrongPassword):
		return nil, fmt.Errorf("folder %s: %w", s.opts.Folder, ErrWrongPassword)
	case err != nil:
		return nil, fmt.Errorf("folder %s: the receiver's key envelope: %w", s.opts.Folder, err)
	}
	keys, err := crypt.DeriveRing(ring)
	if err != nil {
		return nil, fmt.Errorf("folder %s: %w", s.opts.Folder, err)
	}
	return keys, nil
}

// opened is the outcome of opening the folder key.
type opened struct {
	keys *crypt.Keys
	err  error
}

// collect gathers every record of the receiver's log up to sequence last
// (and whatever else arrives in the same messages), acknowledging each
// message as it comes. The log arrives while the folder key is still being
// opened (scrypt takes about a second): records are held until keys
// delivers the key (at most sealedQueue messages of them; then the
// receiver waits for acknowledgements), then handed to a collector made
// by newCollector with it, which collect returns; each record held is also
// shown to early as it comes. A failure on keys ends the collection.
func (s *session) collect(ctx context.Context, last int64, keys <-chan opened, newCollector func(*crypt.Keys) *collector, early func(*protocol.SealedRecord)) (*collector, error) {
	timer := time.NewTimer(s.logStall)
	defer timer.Stop()
	var (
		c        *collector
		held     []*protocol.SealedRecord
		heldMsgs int   // messages held, at most sealedQueue
		seen     int64 // highest log sequence received
	)
	for c == nil || seen < last {
		stall, sealed := timer.C, s.sealed
		switch {
		case seen >= last:
			stall, sealed = nil, nil // only the key is missing
		case heldMsgs >= sealedQueue:
			// Enough held while the key opens: what is not taken in is
			// not acknowledged, so the receiver waits.
			stall, sealed = nil, nil
		}
		var idx *protocol.SealedIndex
		select {
		case k := <-keys:
			keys = nil
			if k.err != nil {
				return nil, k.err
			}
			c = newCollector(k.keys)
			for _, sr := range held {
				c.add(sr)
			}
			held, heldMsgs = nil, 0
			continue
		case idx = <-sealed:
		case <-stall:
			return nil, fmt.Errorf("receiver %s stopped sending its record log at %d of %d", s.opts.Receiver.Short(), seen, last)
		case <-s.done:
			return nil, s.ended()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		timer.Reset(s.logStall)
		for _, sr := range idx.GetRecords() {
			seen = max(seen, sr.GetSequence())
			if c != nil {
				c.add(sr)
			} else {
				held = append(held, sr)
				early(sr)
			}
		}
		if c == nil {
			heldMsgs++
		}
		if len(idx.GetRecords()) == 0 {
			continue
		}
		ack := &protocol.SealedAck{Folder: s.opts.Folder, Sequence: seen}
		if err := s.conn.SealedAck(ctx, ack); err != nil {
			return nil, fmt.Errorf("acknowledging records: %w", err)
		}
	}
	return c, nil
}

// ClusterConfig keeps the receiver's first ClusterConfig.
func (s *session) ClusterConfig(_ protocol.DeviceID, cc *protocol.ClusterConfig) error {
	select {
	case s.cc <- cc:
	default: // a later one: the first decides
	}
	return nil
}

// Index ignores plaintext indexes: a receiver sends none.
func (s *session) Index(protocol.DeviceID, *protocol.Index) error { return nil }

// IndexUpdate ignores plaintext indexes: a receiver sends none.
func (s *session) IndexUpdate(protocol.DeviceID, *protocol.IndexUpdate) error { return nil }

// Request serves nothing: this device holds nothing yet.
func (s *session) Request(context.Context, protocol.DeviceID, *protocol.Request) ([]byte, error) {
	return nil, protocol.ErrNoSuchFile
}

// Closed does nothing: Serve's result says why the connection ended.
func (s *session) Closed(protocol.DeviceID, error) {}

// SealedIndex queues the folder's log messages for collect; it never
// blocks. Other folders' messages are ignored.
func (s *session) SealedIndex(_ protocol.DeviceID, idx *protocol.SealedIndex) error {
	if idx.GetFolder() != s.opts.Folder {
		return nil
	}
	select {
	case s.sealed <- idx:
		return nil
	default:
		return fmt.Errorf("%w: more than %d sealed indexes unacknowledged", errFlowControl, sealedQueue)
	}
}

// SealedAck ignores acknowledgements: this device sends no records.
func (s *session) SealedAck(protocol.DeviceID, *protocol.SealedAck) error { return nil }

var _ protocol.SealedModel = (*session)(nil)
