package connections

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"lockstep/crypt"
)

// acceptLoop accepts connections on ln until it is closed.
func (s *Service) acceptLoop(ctx context.Context, ln net.Listener) {
	cfg := crypt.ServerTLSConfig(s.cfg.Identity, s.isTrusted)
	var delay time.Duration
	for {
		raw, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary trouble such as running out of file descriptors:
			// back off instead of spinning.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accepting sync connection", "err", err)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			}
			continue
		}
		delay = 0
		s.connWG.Go(func() { s.handshakeIncoming(ctx, raw, cfg) })
	}
}

func (s *Service) handshakeIncoming(ctx context.Context, raw net.Conn, cfg *tls.Config) {
	tc := tls.Server(newBufferedConn(raw), cfg)
	hctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		tc.Close()
		var unknown *crypt.UnknownDeviceError
		if errors.As(err, &unknown) {
			s.log.Info("unknown device tried to connect; recorded as pending", "device", unknown.ID.String(), "addr", raw.RemoteAddr().String())
			if err := s.cfg.Registry.Pending(ctx, unknown.ID, raw.RemoteAddr().String()); err != nil && ctx.Err() == nil {
				s.log.Warn("recording pending device", "err", err)
			}
			return
		}
		s.log.Debug("incoming handshake failed", "addr", raw.RemoteAddr().String(), "err", err)
		return
	}
	id, err := crypt.PeerDeviceID(tc.ConnectionState())
	if err != nil {
		tc.Close()
		s.log.Warn("incoming connection without a device ID", "err", err)
		return
	}
	s.run(ctx, &Conn{Conn: tc, ID: id, Addr: raw.RemoteAddr().String(), Since: time.Now(), done: make(chan struct{})})
}

// rejectedBackoff caps the redial delay after connections the peer ended
// at once: it usually means the peer has not accepted this device yet, and
// once it does, the next dial should come soon.
const rejectedBackoff = 15 * time.Second

// dialLoop keeps a connection to p: it dials p's addresses in turn with
// exponential backoff, and after a connection ends starts again. Connections
// it makes run under runCtx, so restarting a dialer keeps its connection.
func (s *Service) dialLoop(ctx, runCtx context.Context, p Peer) {
	var backoff time.Duration
	for ctx.Err() == nil {
		if done, since := s.connDone(p.ID); done != nil {
			select {
			case <-done:
			case <-ctx.Done():
				return
			}
			if time.Since(since) > 10*time.Second {
				backoff = 0
				continue
			}
			// A connection that ended at once (the peer does not trust us
			// yet) must not make us redial in a tight loop.
			backoff = min(max(2*backoff, time.Second), s.cfg.MaxBackoff, rejectedBackoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			continue
		}
		for _, addr := range p.Addresses {
			hostport, err := ParseAddress(addr)
			if err != nil {
				continue
			}
			c, err := s.dial(ctx, p.ID, hostport)
			if err != nil {
				s.log.Debug("dialing device", "device", p.ID.String(), "addr", addr, "err", err)
				continue
			}
			s.connWG.Go(func() { s.run(runCtx, c) })
			break
		}
		if done, _ := s.connDone(p.ID); done != nil {
			continue
		}
		backoff = min(max(2*backoff, time.Second), s.cfg.MaxBackoff)
		select {
		case <-time.After(backoff):
		case <-s.Changed():
			// Another path connected (or a connection ended): look again.
		case <-ctx.Done():
			return
		}
	}
}

func (s *Service) dial(ctx context.Context, id crypt.DeviceID, hostport string) (*Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", hostport)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(newBufferedConn(raw), crypt.ClientTLSConfig(s.cfg.Identity, id))
	if err := tc.HandshakeContext(dctx); err != nil {
		tc.Close()
		return nil, err
	}
	return &Conn{Conn: tc, ID: id, Addr: raw.RemoteAddr().String(), Dialed: true, Since: time.Now(), done: make(chan struct{})}, nil
}

// connDone returns the done channel and start of id's live connection, or
// nil.
func (s *Service) connDone(id crypt.DeviceID) (<-chan struct{}, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[id]; ok {
		return c.done, c.Since
	}
	return nil, time.Time{}
}

// preferred reports whether a connection dialed by the device with the
// smaller ID is the one to keep: both ends compute the same answer.
func (s *Service) preferred(c *Conn) bool {
	me, peer := s.cfg.Identity.ID, c.ID
	iAmSmaller := string(me[:]) < string(peer[:])
	return c.Dialed == iAmSmaller
}

// register makes c the device's connection, resolving duplicates. It returns
// false when c lost and was closed.
func (s *Service) register(c *Conn) bool {
	s.mu.Lock()
	if _, ok := s.trusted[c.ID]; !ok {
		s.mu.Unlock()
		c.close()
		return false
	}
	old, ok := s.conns[c.ID]
	if ok && old.Dialed != c.Dialed && s.preferred(old) {
		s.mu.Unlock()
		s.log.Debug("dropping duplicate connection", "device", c.ID.String())
		c.close()
		return false
	}
	s.conns[c.ID] = c
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if ok {
		old.close()
	}
	return true
}

func (s *Service) unregister(c *Conn) {
	s.mu.Lock()
	if s.conns[c.ID] == c {
		delete(s.conns, c.ID)
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
	c.close()
}

// run registers c and hands it to the handler until it ends.
func (s *Service) run(ctx context.Context, c *Conn) {
	if !s.register(c) {
		return
	}
	now := time.Now()
	if err := s.cfg.Registry.Seen(ctx, c.ID, now); err != nil && ctx.Err() == nil {
		s.log.Warn("recording last contact", "err", err)
	}
	s.log.Debug("connection established", "device", c.ID.String(), "addr", c.Addr)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		// Closing the connection (duplicate, device removed) ends the handler.
		select {
		case <-c.done:
			cancel()
		case <-cctx.Done():
		}
	}()
	err := s.cfg.Handler.ServeConn(cctx, c)
	cancel()
	s.unregister(c)
	if err := s.cfg.Registry.Seen(context.WithoutCancel(ctx), c.ID, time.Now()); err != nil {
		s.log.Debug("recording last contact", "err", err)
	}
	if err != nil && ctx.Err() == nil {
		s.log.Debug("connection ended", "device", c.ID.String(), "reason", err)
	} else {
		s.log.Debug("connection ended", "device", c.ID.String())
	}
}
