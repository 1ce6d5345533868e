package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/crypt"
	"lockstep/sync/discover"
)

// ServerConfig configures a relay server.
type ServerConfig struct {
	Identity    *crypt.Identity
	Listen      string // host:port; "127.0.0.1:0" in tests
	MaxSessions int    // default 1000 concurrent sessions (pending and spliced)
	// MaxRegistrations caps the devices registered at once; default
	// 10000. A device beyond it takes the place of another or is refused
	// (Response UNAVAILABLE), as limits.go says; one already registered
	// may always register again from the same address.
	MaxRegistrations int
	Logger           *slog.Logger
}

// DefaultMaxRegistrations is ServerConfig.MaxRegistrations when it is zero
// or less.
const DefaultMaxRegistrations = 10000

// DefaultMaxSessions is ServerConfig.MaxSessions when it is zero or less.
const DefaultMaxSessions = 1000

// ServerStats is a snapshot of a relay server's state.
type ServerStats struct {
	Registered int   // devices registered now
	Sessions   int   // sessions being spliced now
	Bytes      int64 // bytes spliced in total, both directions together
}

// Server is a relay server. Its methods are safe for concurrent use.
type Server struct {
	id      *crypt.Identity
	ln      net.Listener
	tls     *tls.Config
	log     *slog.Logger
	max     int
	maxRegs int
	bytes   atomic.Int64

	// Time limits; the package constants, shortened by tests.
	handshake, keyTTL, pingEvery, idle, spliceIdle time.Duration

	mu       sync.Mutex
	closed   bool
	conns    map[net.Conn]struct{}
	regs     map[crypt.DeviceID]*registration
	sessions map[[keySize]byte]*session
	// perDevice counts each device's sessions (as requester or target),
	// so that one device can't take every place.
	perDevice    map[crypt.DeviceID]int
	maxPerDevice int
	// live are the sessions being spliced (s.sessions holds those not
	// joined yet).
	live map[*session]struct{}
	// Per-source counts (limits.go), each source's registrations and the
	// sessions it asked for.
	regsPerSource        map[netip.Prefix]int
	sessionsPerSource    map[netip.Prefix]int
	maxRegsPerSource     int
	maxSessionsPerSource int
	limitLog             limitLog
}

// MaxSessionsPerDevice caps the sessions, pending and spliced, in which one
// device is the requester or the target.
const MaxSessionsPerDevice = 32

// NewServer binds cfg.Listen. The caller must call Serve (which closes the
// listener when it returns) or Close.
func NewServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if cfg.Identity == nil {
		return nil, errors.New("relay server: no identity")
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("relay server: %w", err)
	}
	tc := crypt.ServerTLSConfig(cfg.Identity, func(crypt.DeviceID) bool { return true })
	tc.NextProtos = []string{ALPN}
	s := &Server{
		id:           cfg.Identity,
		ln:           ln,
		tls:          tc,
		log:          cfg.Logger,
		max:          cfg.MaxSessions,
		handshake:    handshakeTimeout,
		keyTTL:       sessionKeyTTL,
		pingEvery:    pingInterval,
		idle:         idleTimeout,
		maxRegs:      cfg.MaxRegistrations,
		spliceIdle:   spliceIdle,
		conns:        make(map[net.Conn]struct{}),
		regs:         make(map[crypt.DeviceID]*registration),
		sessions:     make(map[[keySize]byte]*session),
		perDevice:    make(map[crypt.DeviceID]int),
		maxPerDevice: MaxSessionsPerDevice,
		live:         make(map[*session]struct{}),

		regsPerSource:        make(map[netip.Prefix]int),
		sessionsPerSource:    make(map[netip.Prefix]int),
		maxRegsPerSource:     DefaultMaxRegistrationsPerSource,
		maxSessionsPerSource: DefaultMaxSessionsPerSource,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxRegs <= 0 {
		s.maxRegs = DefaultMaxRegistrations
	}
	if s.max <= 0 {
		s.max = DefaultMaxSessions
	}
	return s, nil
}

// URL is the server's address as a relay URL:
// "relay://" + bound host:port + "/?id=" + device ID.
func (s *Server) URL() string {
	return "relay://" + s.ln.Addr().String() + "/?id=" + s.id.ID.String()
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ServerStats{Registered: len(s.regs), Sessions: len(s.live), Bytes: s.bytes.Load()}
}

// Close closes the listener and every connection; a running Serve returns.
// It is for a server whose Serve is never called; ending Serve's context
// does the same.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.closeAll()
	return err
}

// Serve accepts connections until ctx ends, then closes the listener and
// every connection, waits for all its goroutines and returns nil. It returns
// an error only when accepting fails for another reason. Call it once.
func (s *Server) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer func() {
		stop()
		s.Close()
		wg.Wait()
	}()
	s.log.Info("relay listening", "url", s.URL())
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Out of file descriptors and the like: back off a little.
			s.log.Warn("relay: accepting", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if !s.track(c) {
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.untrack(c)
			s.handle(ctx, c)
		}()
	}
}

// track records c so that shutdown closes it; false once shut down.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// untrack closes c and forgets it.
func (s *Server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// closeAll closes every tracked connection and refuses new ones.
func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
}

// handle tells the two kinds of connection apart by their first byte.
func (s *Server) handle(ctx context.Context, c net.Conn) {
	tcp, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	tcp.SetDeadline(time.Now().Add(s.handshake))
	var first [1]byte
	if _, err := io.ReadFull(tcp, first[:]); err != nil {
		s.log.Debug("relay: connection closed before its first byte", "remote", c.RemoteAddr(), "err", err)
		return
	}
	if first[0] == 0x16 { // TLS handshake record
		s.serveProtocol(ctx, tcp, &prefixConn{Conn: tcp, first: first[:]})
		return
	}
	s.serveJoin(ctx, tcp, first[0])
}

// prefixConn gives back bytes already read from Conn before reading more.
type prefixConn struct {
	net.Conn
	first []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.first) > 0 {
		n := copy(b, p.first)
		p.first = p.first[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// serveProtocol runs the TLS handshake and answers the first message.
func (s *Server) serveProtocol(ctx context.Context, raw *net.TCPConn, c net.Conn) {
	tc := tls.Server(c, s.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		s.log.Debug("relay: TLS handshake failed", "remote", raw.RemoteAddr(), "err", err)
		return
	}
	cs := tc.ConnectionState()
	if cs.NegotiatedProtocol != ALPN {
		s.log.Debug("relay: client speaks another protocol", "remote", raw.RemoteAddr(), "alpn", cs.NegotiatedProtocol)
		return
	}
	peer, err := crypt.PeerDeviceID(cs)
	if err != nil {
		return
	}
	m, err := readMessage(tc)
	if err != nil {
		s.log.Debug("relay: reading first message", "device", peer.Short(), "err", err)
		return
	}
	switch b := m.GetBody().(type) {
	case *Message_Join:
		s.serveRegistration(raw, tc, peer)
	case *Message_Connect:
		s.serveConnect(raw, tc, peer, crypt.DeviceID(b.Connect.Device))
	default:
		s.log.Debug("relay: unexpected first message", "device", peer.Short(), "type", fmt.Sprintf("%T", b))
	}
}

// serveConnect answers a Connect: a refusal, or a new session announced to
// both devices.
func (s *Server) serveConnect(raw *net.TCPConn, tc *tls.Conn, from, target crypt.DeviceID) {
	reply := func(m *Message) {
		raw.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := writeMessage(tc, m); err != nil {
			s.log.Debug("relay: answering connect", "device", from.Short(), "err", err)
			return
		}
		// The requester closes once it has the answer.
		raw.SetReadDeadline(time.Now().Add(s.handshake))
		io.CopyN(io.Discard, tc, MaxFrameSize)
	}
	key, reg, code, limited, dropped := s.newSession(from, target, discover.SourceOf(raw.RemoteAddr()))
	if limited {
		s.noteLimit(dropped)
	}
	if code != Response_OK {
		s.log.Debug("relay: connect refused", "from", from.Short(), "to", target.Short(), "code", code)
		reply(responseMessage(code, ""))
		return
	}
	if err := reg.write(invitationMessage(from, key)); err != nil {
		s.dropSession(key)
		reply(responseMessage(Response_UNAVAILABLE, "target's registration failed"))
		return
	}
	s.log.Debug("relay: session created", "from", from.Short(), "to", target.Short())
	reply(invitationMessage(target, key))
}
