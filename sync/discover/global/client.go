package global

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"lockstep/crypt"
)

// Client timing and limits.
const (
	// A lookup's answer is cached for as long as the server has been
	// giving it, within these bounds (see Lookup).
	minTTL      = time.Second      // the least: a new answer is asked for again this soon
	foundTTL    = 60 * time.Second // the most for a found answer
	notFoundTTL = 10 * time.Second // the most for a not-found one
	maxCached   = 4096             // lookups cached at most

	defaultReannounce = 10 * time.Minute // when the server gives no Reannounce-After
	maxReannounce     = 24 * time.Hour
	backoffMin        = 5 * time.Second
	backoffMax        = 5 * time.Minute
	minAnnounceGap    = time.Second // between announcements asked for by Announce

	requestTimeout  = 30 * time.Second
	maxResponseSize = 64 << 10
)

// ClientConfig configures a Client. Identity and Server are required.
type ClientConfig struct {
	Identity  *crypt.Identity
	Server    string           // https://HOST:PORT/?id=ID
	Addresses func() []string  // what to announce; called at every announcement
	Logger    *slog.Logger     // default: discard
	Now       func() time.Time // clock of the lookup cache and Status; default time.Now
}

// ClientStatus is a snapshot of a Client's announcements.
type ClientStatus struct {
	Server       string    // the server's URL as configured
	LastAnnounce time.Time // last successful announcement; zero if none
	Error        string    // the last announcement's error; "" after a success
}

// Client announces this device to one discovery server and looks devices up
// there. Its methods are safe for concurrent use; run one Serve at a time.
type Client struct {
	cfg      ClientConfig
	endpoint string // https://HOST:PORT/
	serverID crypt.DeviceID
	http     *http.Client
	log      *slog.Logger
	trigger  chan struct{}

	// Test hooks: the backoff floor and the gap Announce keeps.
	backoffMin time.Duration
	minGap     time.Duration

	mu        sync.Mutex
	status    ClientStatus
	lastLog   string // the last announcement error logged at Warn
	cache     map[crypt.DeviceID]cached
	announces int // successful announcements, for tests
}

// cached is one lookup's result.
type cached struct {
	addrs []string  // nil: not found
	since time.Time // when the server first gave this answer, of the lookups in a row that got it
	until time.Time
}

// NewClient validates cfg; Server must be https://HOST:PORT/?id=DEVICEID.
// It starts nothing.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Identity == nil {
		return nil, errors.New("discovery client: no identity")
	}
	endpoint, serverID, err := parseServerURL(cfg.Server)
	if err != nil {
		return nil, err
	}
	if cfg.Addresses == nil {
		cfg.Addresses = func() []string { return nil }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	tlsCfg := crypt.ClientTLSConfig(cfg.Identity, serverID)
	tlsCfg.NextProtos = []string{"http/1.1"}
	transport := &http.Transport{
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 20 * time.Second,
		// Requests are rare; no idle connection (and none of its
		// goroutines) outlives a request.
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 16 << 10,
	}
	return &Client{
		cfg:        cfg,
		endpoint:   endpoint,
		serverID:   serverID,
		http:       &http.Client{Transport: transport, Timeout: requestTimeout},
		log:        cfg.Logger.With("component", "discovery-client", "server", cfg.Server),
		trigger:    make(chan struct{}, 1),
		backoffMin: backoffMin,
		minGap:     minAnnounceGap,
		status:     ClientStatus{Server: cfg.Server},
		cache:      make(map[crypt.DeviceID]cached),
	}, nil
}

// parseServerURL checks a discovery server URL and returns the endpoint to
// request and the device ID to pin. Errors wrap ErrServerURL and name raw.
func parseServerURL(raw string) (endpoint string, id crypt.DeviceID, err error) {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrServerURL, raw, why) }
	u, err := url.Parse(raw)
	if err != nil {
		return "", crypt.DeviceID{}, bad(err.Error())
	}
	if u.Scheme != "https" || u.Host == "" || u.Opaque != "" || u.User != nil {
		return "", crypt.DeviceID{}, bad("want https://HOST:PORT/?id=DEVICEID")
	}
	if u.Path != "" && u.Path != "/" {
		return "", crypt.DeviceID{}, bad("want no path: https://HOST:PORT/?id=DEVICEID")
	}
	if u.Port() == "" {
		return "", crypt.DeviceID{}, bad("no port: want https://HOST:PORT/?id=DEVICEID")
	}
	idText := u.Query().Get("id")
	if idText == "" {
		return "", crypt.DeviceID{}, bad("no ?id=DEVICEID naming the server's device")
	}
	id, err = crypt.ParseDeviceID(idText)
	if err != nil {
		return "", crypt.DeviceID{}, bad(err.Error())
	}
	return "https://" + u.Host + "/", id, nil
}

// Status returns the state of announcements.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Announce asks Serve to announce again soon (the addresses changed). It
// never blocks; requests made before the announcement starts coalesce.
func (c *Client) Announce() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Serve announces now, then again when the server's Reannounce-After has
// passed or Announce was called (keeping a second between announcements),
// and retries a failed announcement with backoff from 5 s doubling to 5 min.
// A failure is kept for Status and logged at Warn once per distinct error.
// It returns nil when ctx ends.
func (c *Client) Serve(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-c.trigger:
			if wait := c.minGap - time.Since(last); wait > 0 {
				timer.Reset(wait)
				continue
			}
		}
		last = time.Now()
		next, err := c.announce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.record(err)
		if err != nil {
			next = backoff(c.backoffMin, failures)
			failures++
		} else {
			failures = 0
		}
		timer.Reset(next)
	}
}

// backoff returns the wait before retrying after failures earlier failures
// in a row: floor doubled each time, at most backoffMax.
func backoff(floor time.Duration, failures int) time.Duration {
	return min(floor<<min(failures, 16), backoffMax)
}

// record keeps the outcome of an announcement for Status and logs it.
func (c *Client) record(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		if c.status.Error != "" {
			c.log.Info("announcing to discovery server works again")
		}
		c.status.LastAnnounce = c.cfg.Now()
		c.status.Error = ""
		c.lastLog = ""
		c.announces++
		return
	}
	c.status.Error = err.Error()
	if c.lastLog != c.status.Error {
		c.lastLog = c.status.Error
		c.log.Warn("announcing to discovery server failed", "err", err)
	} else {
		c.log.Debug("announcing to discovery server failed", "err", err)
	}
}

// announce posts this device's addresses once and returns when to announce
// next.
func (c *Client) announce(ctx context.Context) (time.Duration, error) {
	var addrs []string
	for _, a := range c.cfg.Addresses() {
		if len(addrs) == MaxAddresses {
			c.log.Debug("too many addresses; announcing the first", "max", MaxAddresses)
			break
		}
		if err := validateAddress(a); err != nil {
			c.log.Debug("not announcing address", "err", err)
			continue
		}
		addrs = appendUnique(addrs, a)
	}
	body, err := json.Marshal(announcementBody{Addresses: append([]string{}, addrs...)})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("announcing: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.do(req)
	if err != nil {
		return 0, fmt.Errorf("announcing: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return 0, fmt.Errorf("announcing: %w", responseError(resp))
	}
	c.log.Debug("announced", "addresses", addrs)
	return reannounceAfter(resp.Header.Get("Reannounce-After")), nil
}

// reannounceAfter reads a Reannounce-After header: whole seconds, at least
// 1, at most a day; the default when absent or malformed.
func reannounceAfter(h string) time.Duration {
	secs, err := strconv.ParseInt(h, 10, 64)
	if err != nil || secs < 1 {
		return defaultReannounce
	}
	if secs > int64(maxReannounce/time.Second) {
		return maxReannounce
	}
	return time.Duration(secs) * time.Second
}

// Lookup returns the addresses the server holds for id, ErrNotFound when it
// has none. An answer is cached for as long as the server has been giving
// it (since the first of the lookups in a row that got it), at least 1 s
// and at most 60 s when found, 10 s when not found; errors are not cached.
// So a device just added that has not announced itself yet, or one whose
// addresses just changed (a node announces its listen addresses at start
// and the relay it registers with a moment later), is asked for again a
// second later, and the server is asked less and less often, down to once
// a minute, about a device whose answer stays the same.
func (c *Client) Lookup(ctx context.Context, id crypt.DeviceID) ([]string, error) {
	now := c.cfg.Now()
	c.mu.Lock()
	hit, ok := c.cache[id]
	c.mu.Unlock()
	if ok && now.Before(hit.until) {
		if hit.addrs == nil {
			return nil, ErrNotFound
		}
		return append([]string(nil), hit.addrs...), nil
	}
	addrs, err := c.lookup(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		c.remember(id, nil, now)
		return nil, err
	case err != nil:
		return nil, err
	}
	if addrs == nil {
		addrs = []string{}
	}
	c.remember(id, addrs, now)
	return append([]string(nil), addrs...), nil
}

// remember caches the answer addrs (nil: not found) to a lookup of id made
// at now, for as long as Lookup says. When the cache is full it drops the
// expired entries first, or if none expired, all.
func (c *Client) remember(id crypt.DeviceID, addrs []string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := cached{addrs: addrs, since: now}
	if prev, ok := c.cache[id]; ok && (prev.addrs == nil) == (addrs == nil) && slices.Equal(prev.addrs, addrs) {
		e.since = prev.since
	}
	most := foundTTL
	if addrs == nil {
		most = notFoundTTL
	}
	e.until = now.Add(min(max(now.Sub(e.since), minTTL), most))
	if len(c.cache) >= maxCached {
		for k, v := range c.cache {
			if !now.Before(v.until) {
				delete(c.cache, k)
			}
		}
		if len(c.cache) >= maxCached {
			clear(c.cache)
		}
	}
	c.cache[id] = e
}

func (c *Client) lookup(ctx context.Context, id crypt.DeviceID) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint+"?device="+id.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("looking up %s: %w", id.Short(), err)
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, fmt.Errorf("looking up %s: %w", id.Short(), err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, ErrNotFound
	default:
		return nil, fmt.Errorf("looking up %s: %w", id.Short(), responseError(resp))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize+1))
	if err != nil {
		return nil, fmt.Errorf("looking up %s: %w", id.Short(), err)
	}
	if len(body) > maxResponseSize {
		return nil, fmt.Errorf("looking up %s: %w: body larger than %d bytes", id.Short(), ErrServerResponse, maxResponseSize)
	}
	addrs, _, err := parseLookup(body)
	if err != nil {
		return nil, fmt.Errorf("looking up %s: %w", id.Short(), err)
	}
	return addrs, nil
}

// do sends req, turning a server that is not the device the URL names into
// an error wrapping ErrWrongServer that says which device it was.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		var unknown *crypt.UnknownDeviceError
		if errors.As(err, &unknown) {
			return nil, fmt.Errorf("%w: %s presented device %s, the URL names %s",
				ErrWrongServer, req.URL.Host, unknown.ID, c.serverID)
		}
		return nil, err
	}
	return resp, nil
}

// responseError describes an unexpected answer, with the server's
// {"error": ...} message when it sent one.
func responseError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var e errorBody
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return fmt.Errorf("%w: %s: %.200s", ErrServerResponse, resp.Status, e.Error)
	}
	return fmt.Errorf("%w: %s", ErrServerResponse, resp.Status)
}
