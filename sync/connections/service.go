// Package connections keeps one authenticated TLS connection to every known
// device that can be reached: it listens for incoming connections, dials the
// addresses it knows for each device with backoff, records devices that are
// not trusted as pending, and hands each established connection to a Handler
// that runs it until it ends.
//
// Invariants:
//   - A connection is handed to the Handler only after a TLS 1.3 handshake in
//     which the peer proved the key of a trusted device.
//   - At most one connection per device is live. A direct connection beats
//     one through a relay; among equals, when both sides dial at once, both
//     keep the connection dialed by the device with the smaller ID, so they
//     agree without talking; a newer connection in the same direction
//     replaces an older one (the old one is probably dead after a restart).
//   - Relays carry data only when no direct address works: direct addresses
//     are dialed first and get a head start; a relayed device is dialed
//     directly again every RelayRetry, and a direct connection replaces the
//     relayed one.
//   - What unknown devices can make it do is bounded (limits.go): per
//     source (an IPv4 address or an IPv6 /64) at most 16 handshakes under
//     way, and attempts recorded as pending 5 at once, then one per 10 s;
//     over all sources 10 recorded a second; one Info line a minute about
//     them, counting the rest.
//   - No goroutine outlives Serve's context.
package connections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/crypt"
)

// Handler runs an established connection. ServeConn returns when the
// connection ends or ctx is canceled; the service then closes it.
type Handler interface {
	ServeConn(ctx context.Context, c *Conn) error
}

// Registry is what the service needs to know about devices. Implementations
// must be safe for concurrent use.
type Registry interface {
	// Peers lists the trusted devices with the addresses to dial for them.
	Peers(ctx context.Context) ([]Peer, error)
	// Pending records a device that tried to connect but is not trusted,
	// with the name its certificate gives it (unchecked, maybe hostile).
	// The service calls it within its limits, not for every attempt.
	Pending(ctx context.Context, id crypt.DeviceID, name, addr string) error
	// Seen records that a device was connected at t.
	Seen(ctx context.Context, id crypt.DeviceID, t time.Time) error
}

// Resolver finds the current addresses of a dynamic device (local and
// global discovery). Implementations must be safe for concurrent use and
// should answer from a cache: Lookup is called at every dial, and again
// every RelayHeadStart while that dial hangs.
type Resolver interface {
	Lookup(ctx context.Context, id crypt.DeviceID) []string
}

// RelayDialer opens a raw connection to target through the relay at addr
// (relay://HOST:PORT/?id=ID); the service runs TLS over it.
type RelayDialer interface {
	DialRelay(ctx context.Context, addr string, target crypt.DeviceID) (net.Conn, error)
}

// Dynamic is the address entry meaning "find this device through
// discovery". A device with no addresses at all is dynamic too.
const Dynamic = "dynamic"

// Peer is a trusted device and the addresses to dial for it.
type Peer struct {
	ID        crypt.DeviceID
	Addresses []string // tcp://host:port, relay://host:port/?id=ID or Dynamic
}

// Connection types, as Info reports them.
const (
	TypeLAN   = "lan"   // direct, to a private, link-local or on-link address
	TypeWAN   = "wan"   // direct, to any other address
	TypeRelay = "relay" // spliced by a relay
)

// Conn is an established, authenticated connection to a device.
type Conn struct {
	*BatchConn
	ID     crypt.DeviceID
	Addr   string // remote address
	Dialed bool   // true when this node dialed
	Since  time.Time
	// Relay is the relay's address when the connection goes through one.
	Relay string

	done  chan struct{}
	once  sync.Once
	ready atomic.Bool
}

// MarkReady tells the service the handler has established the session (in
// TLS 1.3 a client learns that the server refused its certificate only at
// its first read, so a completed handshake alone proves little). Until then
// the connection is not reported by Connections.
func (c *Conn) MarkReady() { c.ready.Store(true) }

func (c *Conn) close() {
	c.once.Do(func() {
		c.BatchConn.Close()
		close(c.done)
	})
}

// Info describes a live connection for status reports.
type Info struct {
	ID     crypt.DeviceID
	Addr   string
	Dialed bool
	Since  time.Time
	Type   string // TypeLAN, TypeWAN or TypeRelay
}

// Config configures a Service.
type Config struct {
	Identity *crypt.Identity
	Registry Registry
	Handler  Handler
	Listen   []string // tcp://host:port
	Logger   *slog.Logger
	// HandshakeTimeout bounds the TLS handshake; default 10 s.
	HandshakeTimeout time.Duration
	// MaxBackoff caps the delay between dials of one device; default 60 s.
	MaxBackoff time.Duration
	// RefreshInterval is how often the device list is reloaded even without
	// Reload calls; default 30 s.
	RefreshInterval time.Duration
	// Resolver finds addresses of dynamic devices; nil: none are found.
	Resolver Resolver
	// Relay dials relay:// addresses; nil: they are skipped.
	Relay RelayDialer
	// RelayHeadStart is how long direct dials run alone before relays are
	// tried too, whether the direct dials failed or still hang, and how
	// often a dial that hangs past it looks the device up again for new
	// addresses; default 3 s.
	RelayHeadStart time.Duration
	// RelayRetry is how often a device connected through a relay is dialed
	// directly again; default 60 s.
	RelayRetry time.Duration
}

// Service is the connection service. Create it with New, start it with
// Serve.
type Service struct {
	cfg       Config
	log       *slog.Logger
	listeners []net.Listener
	reload    chan struct{}
	connWG    sync.WaitGroup // handshakes and running connections

	mu      sync.Mutex
	trusted map[crypt.DeviceID]Peer
	conns   map[crypt.DeviceID]*Conn
	changed chan struct{} // closed and replaced on every connect/disconnect
	hint    chan struct{} // closed and replaced by Hint
	runCtx  context.Context

	limits *limits // what unknown devices and busy sources may make it do

	// Redial timing: the package constants, shortened by tests.
	rejectedFloor time.Duration // first wait after a connection ended at once
	hintGap       time.Duration // least time between a dial and one a Hint brings forward
}

// New binds the listeners (so the actual ports are known before Serve) and
// returns the service.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Identity == nil || cfg.Registry == nil || cfg.Handler == nil {
		return nil, errors.New("connections: identity, registry and handler are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 60 * time.Second
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = 30 * time.Second
	}
	if cfg.RelayHeadStart == 0 {
		cfg.RelayHeadStart = 3 * time.Second
	}
	if cfg.RelayRetry == 0 {
		cfg.RelayRetry = 60 * time.Second
	}
	s := &Service{
		cfg:     cfg,
		log:     cfg.Logger,
		reload:  make(chan struct{}, 1),
		trusted: map[crypt.DeviceID]Peer{},
		conns:   map[crypt.DeviceID]*Conn{},
		changed: make(chan struct{}),
		hint:    make(chan struct{}),
		limits:  newLimits(),

		rejectedFloor: time.Second,
		hintGap:       minHintGap,
	}
	if err := s.loadPeers(ctx); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	for _, l := range cfg.Listen {
		hostport, err := ParseAddress(l)
		if err != nil {
			s.closeListeners()
			return nil, err
		}
		ln, err := lc.Listen(ctx, "tcp", hostport)
		if err != nil {
			s.closeListeners()
			return nil, fmt.Errorf("listening for sync connections on %s: %w", l, err)
		}
		s.listeners = append(s.listeners, ln)
	}
	return s, nil
}

// ParseAddress turns tcp://host:port into host:port.
func ParseAddress(addr string) (string, error) {
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "tcp" || u.Host == "" || u.Port() == "" || u.Path != "" && u.Path != "/" {
		return "", fmt.Errorf("invalid address %q: want tcp://HOST:PORT", addr)
	}
	return u.Host, nil
}

// Addresses returns the bound listen addresses as tcp://host:port.
func (s *Service) Addresses() []string {
	out := make([]string, 0, len(s.listeners))
	for _, ln := range s.listeners {
		out = append(out, "tcp://"+ln.Addr().String())
	}
	return out
}

func (s *Service) closeListeners() {
	for _, ln := range s.listeners {
		ln.Close()
	}
}

// Reload makes the service re-read the device list soon: dialing new devices,
// dropping connections to removed ones. Safe to call at any time.
func (s *Service) Reload() {
	select {
	case s.reload <- struct{}{}:
	default:
	}
}

// Connections lists the live, ready connections, ordered by device ID.
func (s *Service) Connections() []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Info, 0, len(s.conns))
	for _, c := range s.conns {
		if !c.ready.Load() {
			continue
		}
		out = append(out, Info{ID: c.ID, Addr: c.Addr, Dialed: c.Dialed, Since: c.Since, Type: c.Kind()})
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID[:], out[j].ID[:]) < 0 })
	return out
}

// Connected reports whether id has a live, ready connection.
func (s *Service) Connected(id crypt.DeviceID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[id]
	return ok && c.ready.Load()
}

// Hint tells the service that discovery learned something: devices not
// connected are dialed again now instead of after their backoff, but never
// sooner than a second after their previous dial.
func (s *Service) Hint() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.hint)
	s.hint = make(chan struct{})
}

func (s *Service) hinted() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hint
}

// Changed returns a channel that is closed at the next connect or
// disconnect.
func (s *Service) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Service) isTrusted(id crypt.DeviceID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.trusted[id]
	return ok
}

func (s *Service) loadPeers(ctx context.Context) error {
	peers, err := s.cfg.Registry.Peers(ctx)
	if err != nil {
		return fmt.Errorf("loading devices: %w", err)
	}
	m := make(map[crypt.DeviceID]Peer, len(peers))
	for _, p := range peers {
		if p.ID != s.cfg.Identity.ID {
			m[p.ID] = p
		}
	}
	s.mu.Lock()
	s.trusted = m
	var drop []*Conn
	for id, c := range s.conns {
		if _, ok := m[id]; !ok {
			drop = append(drop, c)
		}
	}
	s.mu.Unlock()
	for _, c := range drop {
		s.log.Info("closing connection to removed device", "device", c.ID.String())
		c.close()
	}
	return nil
}

// Serve accepts and dials until ctx is canceled, then closes every
// connection and returns nil.
func (s *Service) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.runCtx = ctx
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, ln := range s.listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.acceptLoop(ctx, ln)
		}()
	}
	go func() {
		<-ctx.Done()
		s.closeListeners()
	}()

	type dialer struct {
		stop  context.CancelFunc
		addrs string
	}
	dialers := map[crypt.DeviceID]dialer{}
	refresh := func() {
		if err := s.loadPeers(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("reloading devices", "err", err)
		}
		s.mu.Lock()
		peers := make(map[crypt.DeviceID]Peer, len(s.trusted))
		for id, p := range s.trusted {
			peers[id] = p
		}
		s.mu.Unlock()
		for id, d := range dialers {
			if _, ok := peers[id]; !ok {
				d.stop()
				delete(dialers, id)
			}
		}
		for id, p := range peers {
			addrs := fmt.Sprint(p.Addresses)
			if d, ok := dialers[id]; ok {
				if d.addrs == addrs {
					continue
				}
				// Restart so changed addresses take effect at once.
				d.stop()
			}
			dctx, stop := context.WithCancel(ctx)
			dialers[id] = dialer{stop: stop, addrs: addrs}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.dialLoop(dctx, ctx, p)
			}()
		}
	}
	refresh()
	t := time.NewTicker(s.cfg.RefreshInterval)
	defer t.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-s.reload:
			refresh()
		case <-t.C:
			refresh()
		}
	}
	s.mu.Lock()
	for _, c := range s.conns {
		c.close()
	}
	s.runCtx = nil
	s.mu.Unlock()
	wg.Wait()
	s.connWG.Wait()
	return nil
}
