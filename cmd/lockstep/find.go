package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"lockstep/crypt"
	"lockstep/sync/connections"
	"lockstep/sync/discover/global"
	"lockstep/sync/discover/local"
	"lockstep/sync/relay"
	"lockstep/web"
)

// findOptions configure how the node finds other devices and is found.
type findOptions struct {
	// LocalDiscovery announces the node on the LAN and listens for others.
	LocalDiscovery bool
	// LocalListen is the UDP address announcements are received on
	// (default: port 22100 on every interface).
	LocalListen string
	// DiscoveryServers (https://HOST:PORT/?id=ID) are announced to and
	// asked for dynamic devices' addresses.
	DiscoveryServers []string
	// RelayServers (relay://HOST:PORT/?id=ID) are relays the node keeps a
	// registration with, so devices that can't reach it directly can.
	RelayServers []string
	// Discovery and Relay run those services on the given addresses.
	Discovery       bool
	DiscoveryListen string
	Relay           bool
	RelayListen     string
}

// finder owns the parts that find devices: it resolves dynamic devices'
// addresses for the connection service, dials through relays, and keeps
// every announcement current.
type finder struct {
	id      *crypt.Identity
	log     *slog.Logger
	local   *local.Service
	globals []*global.Client
	relays  []*relay.Client
	// The services this node runs, if any.
	discoveryServer *global.Server
	relayServer     *relay.Server
	// conns is set once the connection service exists (it needs the
	// finder first).
	conns *connections.Service
}

// newFinder validates the options and binds the services the node runs.
// On error nothing stays bound.
func newFinder(ctx context.Context, id *crypt.Identity, opts findOptions, log *slog.Logger) (_ *finder, err error) {
	f := &finder{id: id, log: log}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	for _, u := range opts.DiscoveryServers {
		c, err := global.NewClient(global.ClientConfig{Identity: id, Server: u, Addresses: f.announced, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("--discovery-server %s: %w", u, err)
		}
		f.globals = append(f.globals, c)
	}
	for _, u := range opts.RelayServers {
		c, err := relay.NewClient(relay.ClientConfig{Identity: id, Relay: u, Accept: f.acceptRelayed(u), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("--relay-server %s: %w", u, err)
		}
		f.relays = append(f.relays, c)
	}
	if opts.LocalDiscovery {
		l, err := local.New(local.Config{
			ID: id.ID, Addresses: f.announced, Listen: opts.LocalListen, Logger: log,
			OnChange: func(crypt.DeviceID) {
				if f.conns != nil {
					f.conns.Hint()
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("local discovery: %w", err)
		}
		f.local = l
	}
	if opts.Discovery {
		s, err := global.NewServer(ctx, global.ServerConfig{Identity: id, Listen: opts.DiscoveryListen, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("discovery service on %s: %w", opts.DiscoveryListen, err)
		}
		f.discoveryServer = s
	}
	if opts.Relay {
		s, err := relay.NewServer(ctx, relay.ServerConfig{Identity: id, Listen: opts.RelayListen, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("relay on %s: %w", opts.RelayListen, err)
		}
		f.relayServer = s
	}
	return f, nil
}

// close releases the ports of the services bound by newFinder; it is for
// a finder whose serve never runs (serve releases them itself).
func (f *finder) close() {
	if f.discoveryServer != nil {
		f.discoveryServer.Close()
	}
	if f.relayServer != nil {
		f.relayServer.Close()
	}
}

func (f *finder) acceptRelayed(url string) func(net.Conn, crypt.DeviceID) {
	return func(c net.Conn, _ crypt.DeviceID) {
		if f.conns == nil {
			c.Close()
			return
		}
		// The device's claim to be from is checked by the TLS handshake
		// that follows, not taken from the relay.
		f.conns.AcceptRelayed(c, url)
	}
}

// announced is what the node tells others: its listen addresses and the
// relays it is registered with.
func (f *finder) announced() []string {
	var out []string
	if f.conns != nil {
		out = append(out, f.conns.Addresses()...)
	}
	for _, r := range f.relays {
		if a := r.Address(); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Lookup implements connections.Resolver: LAN addresses first, then what
// the discovery services know, asked all at once so that one unreachable
// service delays a dial by its timeout at most, not by the sum.
func (f *finder) Lookup(ctx context.Context, id crypt.DeviceID) []string {
	var out []string
	if f.local != nil {
		out = append(out, f.local.Lookup(id)...)
	}
	found := make([][]string, len(f.globals))
	var wg sync.WaitGroup
	for i, g := range f.globals {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
			defer cancel()
			addrs, err := g.Lookup(lctx, id)
			if err != nil {
				f.log.Debug("looking up device", "device", id.String(), "err", err)
				return
			}
			found[i] = addrs
		})
	}
	wg.Wait()
	for _, addrs := range found {
		out = append(out, addrs...)
	}
	return out
}

// lookupTimeout bounds a discovery service's answer to a lookup.
const lookupTimeout = 5 * time.Second

// DialRelay implements connections.RelayDialer.
func (f *finder) DialRelay(ctx context.Context, addr string, target crypt.DeviceID) (net.Conn, error) {
	return relay.Dial(ctx, f.id, addr, target)
}

// serve runs every part in g until ctx ends.
func (f *finder) serve(ctx context.Context, g *errgroup.Group) {
	if f.local != nil {
		g.Go(func() error { return f.local.Serve(ctx) })
	}
	for _, c := range f.globals {
		g.Go(func() error { return c.Serve(ctx) })
	}
	for _, r := range f.relays {
		g.Go(func() error { return r.Serve(ctx) })
		g.Go(func() error {
			// A registration gained or lost changes what we announce.
			for {
				select {
				case <-r.Changed():
					f.reannounce()
				case <-ctx.Done():
					return nil
				}
			}
		})
	}
	if f.discoveryServer != nil {
		g.Go(func() error { return f.discoveryServer.Serve(ctx) })
	}
	if f.relayServer != nil {
		g.Go(func() error { return f.relayServer.Serve(ctx) })
	}
}

func (f *finder) reannounce() {
	if f.local != nil {
		f.local.Announce()
	}
	for _, g := range f.globals {
		g.Announce()
	}
}

// Report implements web.Discovery.
func (f *finder) Report() web.DiscoveryStatus {
	st := web.DiscoveryStatus{LocalDiscovery: f.local != nil}
	if f.local != nil {
		for _, d := range f.local.Devices() {
			st.Nearby = append(st.Nearby, web.NearbyDevice{ID: d.ID.String(), Addresses: d.Addresses, LastSeen: d.LastSeen})
		}
	}
	for _, g := range f.globals {
		cs := g.Status()
		ds := web.DiscoveryServer{URL: cs.Server, Error: cs.Error}
		if !cs.LastAnnounce.IsZero() {
			t := cs.LastAnnounce
			ds.LastAnnounce = &t
		}
		st.Servers = append(st.Servers, ds)
	}
	for _, r := range f.relays {
		rs := r.Status()
		st.Relays = append(st.Relays, web.RelayStatus{URL: rs.Relay, Registered: rs.Registered, Error: rs.Error})
	}
	if f.discoveryServer != nil {
		st.DiscoveryService = &web.DiscoveryService{URL: f.discoveryServer.URL(), Devices: f.discoveryServer.Stats().Devices}
	}
	if f.relayServer != nil {
		rs := f.relayServer.Stats()
		st.RelayService = &web.RelayService{URL: f.relayServer.URL(), Registered: rs.Registered, Sessions: rs.Sessions, Bytes: rs.Bytes}
	}
	return st
}
