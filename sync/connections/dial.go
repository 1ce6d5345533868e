package connections

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"strings"
	"time"

	"lockstep/crypt"
	"lockstep/sync/discover"
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
		s.connWG.Go(func() { s.handshakeIncoming(ctx, raw, cfg, "") })
	}
}

// AcceptRelayed takes a connection a relay spliced to this node from
// another device (relay is the relay's address) and runs it like one
// accepted on a listener: TLS, trust check, then the handler. Connections
// offered while the service is not serving are closed.
func (s *Service) AcceptRelayed(raw net.Conn, relay string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := s.runCtx
	if ctx == nil || ctx.Err() != nil {
		raw.Close()
		return
	}
	// Under s.mu, so it cannot race the final connWG.Wait in Serve.
	s.connWG.Go(func() {
		s.handshakeIncoming(ctx, raw, crypt.ServerTLSConfig(s.cfg.Identity, s.isTrusted), relay)
	})
}

func (s *Service) handshakeIncoming(ctx context.Context, raw net.Conn, cfg *tls.Config, relay string) {
	src := discover.SourceOf(raw.RemoteAddr())
	if !s.limits.enter(src) {
		raw.Close()
		s.limits.logFailed(time.Now(), true)
		return
	}
	tc := Server(raw, cfg)
	hctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	s.limits.leave(src)
	if err != nil {
		tc.Close()
		var unknown *crypt.UnknownDeviceError
		if errors.As(err, &unknown) {
			s.recordUnknown(ctx, unknown.ID, unknown.Name, src, raw.RemoteAddr().String())
			return
		}
		if ok, skipped, closed := s.limits.logFailed(time.Now(), false); ok {
			attrs := []any{"addr", raw.RemoteAddr().String(), "err", err}
			if skipped > 0 {
				// others: failures since the previous line; closed: of
				// those, connections closed unanswered (their source had
				// too many handshakes under way).
				attrs = append(attrs, "others", skipped, "closed", closed)
			}
			s.log.Debug("incoming handshake failed", attrs...)
		}
		return
	}
	id, err := crypt.PeerDeviceID(tc.ConnectionState())
	if err != nil {
		tc.Close()
		s.log.Warn("incoming connection without a device ID", "err", err)
		return
	}
	addr := raw.RemoteAddr().String()
	if relay != "" {
		addr = relay
	}
	s.run(ctx, &Conn{BatchConn: tc, ID: id, Addr: addr, Since: time.Now(), Relay: relay, done: make(chan struct{})})
}

// recordUnknown records an unknown device's attempt from src (at addr) as
// pending, within the limits, and logs it, at most one line per logEvery.
func (s *Service) recordUnknown(ctx context.Context, id crypt.DeviceID, name string, src netip.Prefix, addr string) {
	now := time.Now()
	recorded := s.limits.recordPending(src, now)
	if recorded {
		if err := s.cfg.Registry.Pending(ctx, id, name, addr); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("recording pending device", "err", err)
			}
			return
		}
	}
	if ok, skipped, unrecorded := s.limits.logUnknown(now, recorded); ok {
		attrs := []any{"device", id.String(), "addr", addr}
		if skipped > 0 {
			// others: attempts since the previous line; unrecorded: of
			// those, the ones beyond the limits.
			attrs = append(attrs, "others", skipped, "unrecorded", unrecorded)
		}
		s.log.Info("unknown device tried to connect; recorded as pending", attrs...)
	}
}

// rejectedBackoff caps the redial delay after connections the peer ended
// at once: it usually means the peer has not accepted this device yet, and
// once it does, the next dial should come soon.
const rejectedBackoff = 15 * time.Second

// minHintGap is the least time between two dials of a device when a Hint
// brings the second forward: discovery input (which anyone on the LAN can
// send) must not turn backoff into a dial loop.
const minHintGap = time.Second

// dialLoop keeps a connection to p: it dials p's addresses with
// exponential backoff, and after a connection ends starts again; while the
// connection goes through a relay it keeps trying p's direct addresses.
// Connections it makes run under runCtx, so restarting a dialer keeps its
// connection.
func (s *Service) dialLoop(ctx, runCtx context.Context, p Peer) {
	var backoff time.Duration
	// last is the connection to p seen or made most recently, until the
	// loop has dealt with its end. It is followed rather than looked up
	// again, because one the peer ends at once may be gone (or, made here,
	// never registered) before the loop looks.
	var last *Conn
	for ctx.Err() == nil {
		if c := s.current(p.ID); c != nil {
			last = c
			if c.Relay != "" {
				s.upgrade(ctx, runCtx, p, c)
				continue
			}
			select {
			case <-c.done:
			case <-ctx.Done():
				return
			}
			continue
		}
		if last != nil {
			lasted := time.Since(last.Since)
			last = nil
			if lasted > 10*time.Second {
				backoff = 0
				continue
			}
			// A connection that ended at once (the peer does not trust us
			// yet) must not make us redial in a tight loop.
			backoff = min(max(2*backoff, s.rejectedFloor), s.cfg.MaxBackoff, rejectedBackoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			continue
		}
		changed, hint := s.Changed(), s.hinted()
		tried := time.Now()
		if c := s.connect(ctx, p, true); c != nil {
			registered := s.Changed()
			last = c
			s.connWG.Go(func() { s.run(runCtx, c) })
			// Wait for it to register (or lose to a connection in the
			// other direction) before looking again.
			for s.current(p.ID) != c {
				select {
				case <-registered:
					registered = s.Changed()
					continue
				case <-c.done:
				case <-ctx.Done():
					return
				}
				break
			}
			continue
		}
		backoff = min(max(2*backoff, time.Second), s.cfg.MaxBackoff)
		if !s.waitRedial(ctx, p.ID, tried, backoff, changed, hint) {
			return
		}
	}
}

// waitRedial waits after a failed dial of id that started at tried: for
// backoff, or less when id got connected meanwhile (it dialed us) or when
// discovery learned something (Hint), though then not sooner than hintGap
// after tried. Changes of other devices' connections do not end the wait.
// It returns false when ctx ended.
func (s *Service) waitRedial(ctx context.Context, id crypt.DeviceID, tried time.Time, backoff time.Duration, changed, hint <-chan struct{}) bool {
	t := time.NewTimer(backoff)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-changed:
			changed = s.Changed()
			if s.current(id) != nil {
				return true
			}
		case <-hint:
			hint = nil
			if rest := time.Until(tried.Add(s.hintGap)); rest < time.Until(tried.Add(backoff)) {
				t.Reset(max(rest, 0))
			}
		case <-ctx.Done():
			return false
		}
	}
}

// upgrade waits while c, a relayed connection to p, lasts, dialing p's
// direct addresses every RelayRetry; a direct connection that works
// replaces c (register prefers it).
func (s *Service) upgrade(ctx, runCtx context.Context, p Peer, c *Conn) {
	t := time.NewTimer(s.cfg.RelayRetry)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d := s.connect(ctx, p, false); d != nil {
			s.log.Info("direct connection replaces relay", "device", p.ID.String(), "addr", d.Addr)
			s.connWG.Go(func() { s.run(runCtx, d) })
			select {
			case <-c.done:
			case <-d.done:
			case <-ctx.Done():
			}
			return
		}
		t.Reset(s.cfg.RelayRetry)
	}
}

// addresses returns p's addresses to dial: its own, and if it is dynamic,
// those discovery knows; direct ones first, without duplicates.
func (s *Service) addresses(ctx context.Context, p Peer) (direct, relays []string) {
	all := make([]string, 0, len(p.Addresses))
	dynamic := len(p.Addresses) == 0
	for _, a := range p.Addresses {
		if a == Dynamic {
			dynamic = true
			continue
		}
		all = append(all, a)
	}
	if dynamic && s.cfg.Resolver != nil {
		all = append(all, s.cfg.Resolver.Lookup(ctx, p.ID)...)
	}
	seen := make(map[string]bool, len(all))
	for _, a := range all {
		if seen[a] {
			continue
		}
		seen[a] = true
		switch {
		case strings.HasPrefix(a, "tcp://"):
			direct = append(direct, a)
		case strings.HasPrefix(a, "relay://"):
			relays = append(relays, a)
		}
	}
	return direct, relays
}

// connect dials all of p's direct addresses at once and, when relays are
// allowed, its relay addresses once the direct dials have failed or had
// their head start, whether or not they still hang. While dials hang past
// the head start it looks p up again every head start and dials the
// addresses that are new: discovery may learn of p's relay only after the
// first lookup (a device announces the relay it registered with a moment
// after its listen addresses). It returns the first connection that
// completes its handshake (closing any later ones), or nil.
func (s *Service) connect(ctx context.Context, p Peer, relays bool) *Conn {
	relays = relays && s.cfg.Relay != nil
	direct, via := s.addresses(ctx, p)
	if !relays {
		via = nil
	}
	if len(direct)+len(via) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan *Conn)
	pending := 0
	dialed := make(map[string]bool, len(direct)+len(via))
	start := func(addr string, dial func() (*Conn, error)) {
		dialed[addr] = true
		pending++
		go func() {
			c, err := dial()
			if err != nil {
				s.log.Debug("dialing device", "device", p.ID.String(), "addr", addr, "err", err)
			}
			results <- c
		}()
	}
	dialDirect := func(addrs []string) {
		for _, addr := range addrs {
			hostport, err := ParseAddress(addr)
			if err != nil || dialed[addr] {
				continue
			}
			start(addr, func() (*Conn, error) { return s.dial(ctx, p.ID, hostport) })
		}
	}
	relaysDue := false // the direct dials had their head start, or failed
	dialRelays := func(addrs []string) {
		relaysDue = true
		for _, addr := range addrs {
			if !dialed[addr] {
				start(addr, func() (*Conn, error) { return s.dialRelay(ctx, p.ID, addr) })
			}
		}
	}
	dialDirect(direct)
	if relays && pending == 0 {
		dialRelays(via)
	}
	// The timer ends the direct dials' head start, and then each wait
	// before a new lookup; headStart is nil while it is not wanted.
	t := time.NewTimer(s.cfg.RelayHeadStart)
	defer t.Stop()
	headStart := t.C
	if !relays || relaysDue {
		headStart = nil
	}
	type answer struct{ direct, via []string }
	found := make(chan answer, 1)
	looking := false
	var won *Conn
	for pending > 0 || looking {
		select {
		case c := <-results:
			pending--
			switch {
			case c == nil:
			case won == nil:
				won = c
				cancel() // the rest are no longer needed
			default:
				c.close()
			}
			if won == nil && pending == 0 && relays && !relaysDue {
				dialRelays(via)
			}
		case <-headStart:
			headStart = nil
			if won != nil {
				continue
			}
			if !relaysDue {
				dialRelays(via)
			}
			looking = true
			go func() {
				d, v := s.addresses(ctx, p)
				found <- answer{d, v}
			}()
		case a := <-found:
			looking = false
			if won != nil {
				continue
			}
			dialDirect(a.direct)
			dialRelays(a.via)
			if pending > 0 {
				t.Reset(s.cfg.RelayHeadStart)
				headStart = t.C
			}
		}
	}
	return won
}

func (s *Service) dial(ctx context.Context, id crypt.DeviceID, hostport string) (*Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", hostport)
	if err != nil {
		return nil, err
	}
	return s.handshakeOutgoing(dctx, raw, id, raw.RemoteAddr().String(), "")
}

func (s *Service) dialRelay(ctx context.Context, id crypt.DeviceID, addr string) (*Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	defer cancel()
	raw, err := s.cfg.Relay.DialRelay(dctx, addr, id)
	if err != nil {
		return nil, err
	}
	return s.handshakeOutgoing(dctx, raw, id, addr, addr)
}

func (s *Service) handshakeOutgoing(ctx context.Context, raw net.Conn, id crypt.DeviceID, addr, relay string) (*Conn, error) {
	tc := Client(raw, crypt.ClientTLSConfig(s.cfg.Identity, id))
	if err := tc.HandshakeContext(ctx); err != nil {
		tc.Close()
		return nil, err
	}
	return &Conn{BatchConn: tc, ID: id, Addr: addr, Dialed: true, Since: time.Now(), Relay: relay, done: make(chan struct{})}, nil
}

// current returns id's live connection, or nil.
func (s *Service) current(id crypt.DeviceID) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id]
}

// preferred reports whether a connection dialed by the device with the
// smaller ID is the one to keep: both ends compute the same answer.
func (s *Service) preferred(c *Conn) bool {
	me, peer := s.cfg.Identity.ID, c.ID
	iAmSmaller := string(me[:]) < string(peer[:])
	return c.Dialed == iAmSmaller
}

// keepOld decides between two connections to one device: a direct one
// beats a relayed one, then the preferred direction wins, then the newer.
func (s *Service) keepOld(old, c *Conn) bool {
	if (old.Relay == "") != (c.Relay == "") {
		return old.Relay == ""
	}
	return old.Dialed != c.Dialed && s.preferred(old)
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
	if ok && s.keepOld(old, c) {
		s.mu.Unlock()
		s.log.Debug("dropping duplicate connection", "device", c.ID.String())
		c.close()
		return false
	}
	s.conns[c.ID] = c
	s.changedLocked()
	s.mu.Unlock()
	if ok {
		old.close()
	}
	return true
}

// changedLocked wakes everyone waiting on Changed. Must be called with
// s.mu held.
func (s *Service) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Service) unregister(c *Conn) {
	s.mu.Lock()
	if s.conns[c.ID] == c {
		delete(s.conns, c.ID)
		s.changedLocked()
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
