package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"lockstep/crypt"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	Identity *crypt.Identity
	Relay    string // relay://HOST:PORT/?id=ID
	// Accept receives each relayed connection: a raw net.Conn spliced to
	// device from, on which the caller runs the TLS *server* handshake of
	// its own protocol. Called in its own goroutine; owns conn. Client.Serve
	// waits for every Accept it started to return, so Accept must return
	// soon after the context given to Serve ends.
	Accept func(conn net.Conn, from crypt.DeviceID)
	Logger *slog.Logger
}

// ClientStatus is a snapshot of a Client's registration.
type ClientStatus struct {
	Relay      string // the relay URL
	Registered bool
	Error      string // why the last registration attempt or registration ended; "" when none
}

// Client keeps a device registered with one relay. Its methods are safe for
// concurrent use.
type Client struct {
	cfg      ClientConfig
	hostport string
	relayID  crypt.DeviceID
	log      *slog.Logger

	// Timing: the package constants, shortened by tests.
	minBackoff, maxBackoff, pingEvery, idle time.Duration

	joining chan struct{} // a slot per session being joined (maxJoining)
	dropped limitLog      // invitations dropped for want of a slot

	mu         sync.Mutex
	registered bool
	lastErr    string
	changed    chan struct{}
}

// NewClient validates cfg: an identity, an Accept function and a relay URL
// with its ?id= (errors wrap ErrBadURL).
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Identity == nil || cfg.Accept == nil {
		return nil, errors.New("relay client: identity and Accept are required")
	}
	hostport, relayID, err := ParseURL(cfg.Relay)
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:        cfg,
		hostport:   hostport,
		relayID:    relayID,
		log:        cfg.Logger,
		minBackoff: time.Second,
		maxBackoff: 60 * time.Second,
		pingEvery:  pingInterval,
		idle:       idleTimeout,
		changed:    make(chan struct{}),
		joining:    make(chan struct{}, maxJoining),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Address is cfg.Relay while registered, "" otherwise.
func (c *Client) Address() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.registered {
		return c.cfg.Relay
	}
	return ""
}

// Changed returns a channel that is closed (and replaced) the next time
// Address changes.
func (c *Client) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Status returns the registration's state.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ClientStatus{Relay: c.cfg.Relay, Registered: c.registered, Error: c.lastErr}
}

// setState records the registration state, firing Changed when Address
// changes.
func (c *Client) setState(registered bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastErr = ""
	if err != nil {
		c.lastErr = err.Error()
	}
	if registered != c.registered {
		c.registered = registered
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// Serve keeps a registration with the relay, reconnecting after a failure
// with a backoff from 1 s doubling to 60 s (back to 1 s after a successful
// registration). Each Invitation is joined and handed to Accept in its own
// goroutine, at most maxJoining joins at once: invitations beyond that are
// dropped (an honest relay never sends that many). When ctx ends Serve closes the registration, waits for the
// goroutines it started (Accept calls included) and returns nil.
func (c *Client) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := c.minBackoff
	for {
		registered, err := c.register(ctx, &wg)
		if ctx.Err() != nil {
			c.setState(false, nil)
			return nil
		}
		c.setState(false, err)
		if registered {
			c.log.Info("relay registration lost", "relay", c.hostport, "err", err)
			backoff = c.minBackoff
		} else {
			c.log.Debug("relay registration failed", "relay", c.hostport, "err", err, "retry", backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			c.setState(false, nil)
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, c.maxBackoff)
	}
}

// register runs one registration until it ends; registered says whether
// the relay accepted it.
func (c *Client) register(ctx context.Context, wg *sync.WaitGroup) (registered bool, err error) {
	tc, err := dialProtocol(ctx, c.cfg.Identity, c.hostport, c.relayID)
	if err != nil {
		return false, err
	}
	raw := tc.NetConn()
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()

	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := writeMessage(tc, joinMessage()); err != nil {
		return false, fmt.Errorf("relay %s: sending join: %w", c.hostport, err)
	}
	m, err := readMessage(tc)
	if err != nil {
		return false, fmt.Errorf("relay %s: reading the answer to join: %w", c.hostport, err)
	}
	r := m.GetResponse()
	if r == nil {
		return false, fmt.Errorf("relay %s: %w: unexpected answer to join", c.hostport, ErrMalformed)
	}
	if err := responseError(r); err != nil {
		return false, fmt.Errorf("relay %s: join refused: %w", c.hostport, err)
	}
	raw.SetDeadline(time.Time{})
	c.setState(true, nil)
	c.log.Info("registered with relay", "relay", c.hostport)

	var wmu sync.Mutex
	write := func(m *Message) error {
		wmu.Lock()
		defer wmu.Unlock()
		raw.SetWriteDeadline(time.Now().Add(writeTimeout))
		err := writeMessage(tc, m)
		if err != nil {
			raw.Close()
		}
		return err
	}
	pingStop := make(chan struct{})
	var pings sync.WaitGroup
	pings.Add(1)
	go func() {
		defer pings.Done()
		t := time.NewTicker(c.pingEvery)
		defer t.Stop()
		for {
			select {
			case <-pingStop:
				return
			case <-t.C:
				if write(pingMessage()) != nil {
					return
				}
			}
		}
	}()
	defer func() {
		close(pingStop)
		pings.Wait()
	}()

	for {
		raw.SetReadDeadline(time.Now().Add(c.idle))
		m, err := readMessage(tc)
		if err != nil {
			return true, fmt.Errorf("relay %s: %w", c.hostport, err)
		}
		switch b := m.GetBody().(type) {
		case *Message_Ping:
			if err := write(pongMessage()); err != nil {
				return true, fmt.Errorf("relay %s: %w", c.hostport, err)
			}
		case *Message_Pong:
		case *Message_Invitation:
			from, key := crypt.DeviceID(b.Invitation.From), [keySize]byte(b.Invitation.Key)
			select {
			case c.joining <- struct{}{}:
			default:
				if ok, _, n := c.dropped.note(time.Now(), true); ok {
					c.log.Debug("relay: invitations dropped, too many sessions being joined", "relay", c.hostport, "dropped", n)
				}
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.acceptSession(ctx, from, key)
			}()
		default:
			return true, fmt.Errorf("relay %s: %w: unexpected %T on a registration", c.hostport, ErrMalformed, b)
		}
	}
}

// acceptSession joins an invited session, gives back its slot in
// c.joining, and hands the session to Accept.
func (c *Client) acceptSession(ctx context.Context, from crypt.DeviceID, key [keySize]byte) {
	conn, err := joinSession(ctx, c.hostport, key)
	<-c.joining
	if err != nil {
		c.log.Debug("relay: joining a session failed", "relay", c.hostport, "from", from.Short(), "err", err)
		return
	}
	c.log.Debug("relay: session accepted", "relay", c.hostport, "from", from.Short())
	c.cfg.Accept(conn, from)
}
