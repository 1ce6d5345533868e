package local

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"lockstep/crypt"
)

// DefaultPort is the UDP port announcements are sent to and received on:
// the same number as the default sync port.
const DefaultPort = 22100

// DefaultInterval is the time between two periodic announcements.
const DefaultInterval = 30 * time.Second

// multicastGroup is the IPv6 link-local (transient) group announcements go to.
var multicastGroup = netip.MustParseAddr("ff12::8384")

const (
	// expiryIntervals is how many intervals an address is kept unheard.
	expiryIntervals = 3
	// minAnswerGap is the least time between two announcements sent in
	// answer to others (or to Announce).
	minAnswerGap = time.Second
	// maxDevices bounds the devices remembered; a new one beyond it is
	// dropped while every remembered one is still fresh.
	maxDevices = 1024
	// maxKnownAddresses bounds the addresses remembered per device (two
	// full announcements, e.g. one heard over IPv4 and one over IPv6).
	maxKnownAddresses = 2 * MaxAddresses
)

// ErrConfig is wrapped by New's errors about an invalid Config.
var ErrConfig = errors.New("invalid local discovery config")

// ErrRunning is returned by Serve when the Service is already serving.
var ErrRunning = errors.New("local discovery already running")

// Config configures a Service.
type Config struct {
	ID crypt.DeviceID
	// Addresses returns what to announce; it is called (from Serve's
	// sending goroutine) before every announcement. Invalid addresses are
	// left out, and so are those beyond MaxAddresses or the packet size.
	Addresses func() []string
	// Listen is the UDP address to receive on. When empty: ":22100" (IPv4,
	// broadcasts) plus "[::]:22100" joined to the multicast group
	// ff12::8384 on every up multicast-capable interface. Tests pass
	// "127.0.0.1:0".
	Listen string
	// Targets, if set, replace broadcast/multicast with unicast to these
	// host:port addresses (tests). By default each announcement goes to the
	// directed broadcast address of every up, broadcast-capable IPv4
	// interface (computed at send time, so new interfaces count) and to
	// [ff12::8384%iface]:port on every up multicast-capable interface with
	// an IPv6 address; port is Listen's port when that is not 0, else
	// DefaultPort.
	Targets []string
	// Interval is the time between announcements; default DefaultInterval.
	// Addresses are forgotten 3 × Interval after they were last heard.
	Interval time.Duration
	Logger   *slog.Logger
	// OnChange, if set, is called (from a receiving goroutine; it must not
	// block) when a device appears or its address set changes.
	OnChange func(crypt.DeviceID)
	// Now returns the time used for LastSeen and expiry (tests); default
	// time.Now. Timers and rate limits use the real clock.
	Now func() time.Time
}

// Device is a device heard on the local network.
type Device struct {
	ID        crypt.DeviceID
	Addresses []string // resolved (unspecified hosts replaced), sorted
	LastSeen  time.Time
}

// Service announces this device and remembers the devices it hears. Create
// it with New; it does nothing until Serve.
type Service struct {
	cfg      Config
	log      *slog.Logger
	port     int           // where default announcements go
	trigger  chan struct{} // capacity 1: an announcement is wanted soon
	warnings *warnings     // rate limit for send-error warnings
	mu       sync.Mutex    // guards the fields below
	devices  map[crypt.DeviceID]*entry
	running  bool
	instance int64    // of the current Serve
	addr     net.Addr // bound receive address, nil if none
}

// entry is what is remembered about one device.
type entry struct {
	instance int64
	lastSeen time.Time
	addrs    map[string]time.Time // resolved address → last heard
}

// New checks cfg and returns a Service. It binds nothing.
func New(cfg Config) (*Service, error) {
	if cfg.ID.IsZero() {
		return nil, fmt.Errorf("%w: no device ID", ErrConfig)
	}
	if cfg.Addresses == nil {
		return nil, fmt.Errorf("%w: no Addresses func", ErrConfig)
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("%w: negative interval %v", ErrConfig, cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	port := DefaultPort
	if cfg.Listen != "" {
		_, p, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("%w: listen address: %w", ErrConfig, err)
		}
		if p != 0 {
			port = p
		}
	}
	cfg.Targets = slices.Clone(cfg.Targets)
	for _, t := range cfg.Targets {
		if _, p, err := splitHostPort(t); err != nil || p == 0 {
			return nil, fmt.Errorf("%w: target %q: want host:port", ErrConfig, t)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		cfg:      cfg,
		log:      log.With("component", "local-discovery"),
		port:     port,
		trigger:  make(chan struct{}, 1),
		warnings: newWarnings(),
		devices:  make(map[crypt.DeviceID]*entry),
	}, nil
}

// splitHostPort splits "host:port" with a numeric port.
func splitHostPort(s string) (string, int, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	return host, int(p), nil
}

// Announce asks for an announcement now, for example because the addresses
// changed. It never blocks; announcements asked for within a second of the
// last one are sent when that second has passed, and several requests
// made meanwhile are sent as one. Asked before Serve, it is a no-op: Serve
// announces at start anyway.
func (s *Service) Announce() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Addr returns the bound IPv4 (or Listen) receive address while Serve has
// it bound, else nil.
func (s *Service) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Lookup returns the unexpired addresses of id, sorted, or nil if none.
func (s *Service) Lookup(id crypt.DeviceID) []string {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.devices[id]
	if e == nil {
		return nil
	}
	return e.fresh(now.Add(-s.expiry()))
}

// Devices returns every device with unexpired addresses, sorted by ID.
func (s *Service) Devices() []Device {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Device
	for id, e := range s.devices {
		if addrs := e.fresh(now.Add(-s.expiry())); addrs != nil {
			out = append(out, Device{ID: id, Addresses: addrs, LastSeen: e.lastSeen})
		}
	}
	slices.SortFunc(out, func(a, b Device) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

func (s *Service) expiry() time.Duration { return expiryIntervals * s.cfg.Interval }

// fresh returns e's addresses heard after cutoff, sorted, or nil.
func (e *entry) fresh(cutoff time.Time) []string {
	var out []string
	for a, seen := range e.addrs {
		if seen.After(cutoff) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// record remembers that id announced addrs (resolved, non-empty) with
// instance at now. It reports whether the device is new to us (never heard,
// or all its addresses expired) or restarted, and whether its set of
// unexpired addresses changed. Must be called with s.mu held.
func (s *Service) record(id crypt.DeviceID, instance int64, addrs []string, now time.Time) (fresh, changed bool) {
	cutoff := now.Add(-s.expiry())
	e := s.devices[id]
	var before []string
	if e != nil {
		before = e.fresh(cutoff)
	}
	switch {
	case e == nil:
		if len(s.devices) >= maxDevices {
			s.prune(cutoff)
			if len(s.devices) >= maxDevices {
				return false, false
			}
		}
		e = &entry{}
		s.devices[id] = e
		fresh = true
	case before == nil:
		fresh = true
	case e.instance != instance:
		fresh = true
	}
	if fresh {
		e.addrs = make(map[string]time.Time, len(addrs))
	}
	e.instance, e.lastSeen = instance, now
	for _, a := range addrs {
		e.addrs[a] = now
	}
	for a, seen := range e.addrs {
		if !seen.After(cutoff) {
			delete(e.addrs, a)
		}
	}
	for len(e.addrs) > maxKnownAddresses {
		delete(e.addrs, oldest(e.addrs))
	}
	return fresh, !slices.Equal(before, e.fresh(cutoff))
}

// oldest returns the address heard longest ago (the smallest on a tie).
func oldest(addrs map[string]time.Time) string {
	var old string
	var at time.Time
	for a, seen := range addrs {
		if old == "" || seen.Before(at) || (seen.Equal(at) && a < old) {
			old, at = a, seen
		}
	}
	return old
}

// prune forgets devices with no address heard after cutoff. Must be called
// with s.mu held.
func (s *Service) prune(cutoff time.Time) {
	for id, e := range s.devices {
		if e.fresh(cutoff) == nil {
			delete(s.devices, id)
		}
	}
}
