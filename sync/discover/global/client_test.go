package global

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

func TestNewClientServerURL(t *testing.T) {
	id := newIdentity(t, "a")
	good := "https://127.0.0.1:8443/?id=" + id.ID.String()
	if _, err := NewClient(ClientConfig{Identity: id, Server: good}); err != nil {
		t.Fatalf("%s: %v", good, err)
	}
	for _, raw := range []string{
		"https://127.0.0.1:8443/",
		"https://127.0.0.1:8443",
		"https://127.0.0.1:8443/?id=",
		"https://127.0.0.1:8443/?id=AAAA",
		"http://127.0.0.1:8443/?id=" + id.ID.String(),
		"https://127.0.0.1/?id=" + id.ID.String(),
		"https://127.0.0.1:8443/v2/?id=" + id.ID.String(),
		"127.0.0.1:8443",
		"",
	} {
		_, err := NewClient(ClientConfig{Identity: id, Server: raw})
		if !errors.Is(err, ErrServerURL) || !strings.Contains(err.Error(), `"`+raw+`"`) {
			t.Errorf("%q: %v, want ErrServerURL naming the URL", raw, err)
		}
	}
	_, err := NewClient(ClientConfig{Identity: id, Server: "https://127.0.0.1:8443/"})
	if err == nil || !strings.Contains(err.Error(), "?id=") {
		t.Errorf("missing id: %v, want an error mentioning ?id=", err)
	}
	if _, err := NewClient(ClientConfig{Server: good}); err == nil {
		t.Error("NewClient without identity succeeded")
	}
}

func TestClientWrongServerID(t *testing.T) {
	s := startServer(t, ServerConfig{})
	a, other := newIdentity(t, "a"), newIdentity(t, "other")
	url := "https://" + s.ln.Addr().String() + "/?id=" + other.ID.String()
	c := newClient(t, ClientConfig{Identity: a, Server: url, Addresses: func() []string { return []string{"tcp://0.0.0.0:1"} }})

	_, err := c.Lookup(context.Background(), a.ID)
	if !errors.Is(err, ErrWrongServer) {
		t.Fatalf("lookup: %v, want ErrWrongServer", err)
	}
	for _, want := range []string{s.cfg.Identity.ID.String(), other.ID.String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := c.announce(context.Background()); !errors.Is(err, ErrWrongServer) {
		t.Errorf("announce: %v, want ErrWrongServer", err)
	}
	if st := s.Stats(); st.Devices != 0 {
		t.Errorf("Stats: %+v", st)
	}
}

// serveClient runs c.Serve until the test ends.
func serveClient(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("client Serve: %v", err)
		}
	})
}

func (c *Client) announceCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.announces
}

func TestClientReannouncesAfterServerInterval(t *testing.T) {
	// TTL 3 s: Reannounce-After is 1 s.
	s := startServer(t, ServerConfig{TTL: 3 * time.Second})
	a := newIdentity(t, "a")
	var calls sync.WaitGroup
	calls.Add(2)
	var mu sync.Mutex
	n := 0
	c := newClient(t, ClientConfig{Identity: a, Server: s.URL(), Addresses: func() []string {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n <= 2 {
			calls.Done()
		}
		return []string{"tcp://0.0.0.0:1"}
	}})
	start := time.Now()
	serveClient(t, c)
	testutil.Eventually(t, waitTimeout, "two announcements", func() bool { return s.announces.Load() >= 2 })
	if el := time.Since(start); el < time.Second {
		t.Errorf("re-announced after %v, before Reannounce-After", el)
	}
	calls.Wait() // Addresses was called at every announcement
	st := c.Status()
	if st.Server != s.URL() || st.LastAnnounce.IsZero() || st.Error != "" {
		t.Errorf("Status: %+v", st)
	}
}

func TestClientAnnounceTrigger(t *testing.T) {
	s := startServer(t, ServerConfig{}) // Reannounce-After 10 min
	a, b := newIdentity(t, "a"), newIdentity(t, "b")
	var mu sync.Mutex
	addrs := []string{"tcp://0.0.0.0:1"}
	c := newClient(t, ClientConfig{Identity: a, Server: s.URL(), Addresses: func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(addrs)
	}})
	c.minGap = 10 * time.Millisecond
	serveClient(t, c)
	testutil.Eventually(t, waitTimeout, "the first announcement", func() bool { return c.announceCount() == 1 })

	mu.Lock()
	addrs = []string{"tcp://0.0.0.0:2"}
	mu.Unlock()
	c.Announce()
	testutil.Eventually(t, waitTimeout, "the second announcement", func() bool { return c.announceCount() == 2 })
	got, err := newClient(t, ClientConfig{Identity: b, Server: s.URL()}).Lookup(context.Background(), a.ID)
	if err != nil || !slices.Equal(got, []string{"tcp://127.0.0.1:2"}) {
		t.Errorf("after Announce: %q, %v", got, err)
	}
	// Five times minGap with no trigger: room for an announcement that should not come.
	time.Sleep(50 * time.Millisecond)
	if n := c.announceCount(); n != 2 {
		t.Errorf("%d announcements without a trigger, want 2", n)
	}
}

func TestClientBackoffAndErrorLog(t *testing.T) {
	clk := testutil.NewClock()
	s := startServer(t, ServerConfig{MaxDevices: 1, TTL: time.Hour, Now: clk.Now})
	// Fill the server so the client's announcements get 503.
	if code, body, _ := newRawClient(t, s, newIdentity(t, "filler")).do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:1")); code != 204 {
		t.Fatalf("filler: %d %s", code, body)
	}
	logs := &testutil.LogRecorder{}
	a := newIdentity(t, "a")
	var mu sync.Mutex
	attempts := 0
	c := newClient(t, ClientConfig{Identity: a, Server: s.URL(), Logger: slog.New(logs), Addresses: func() []string {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		return []string{"tcp://0.0.0.0:1"}
	}})
	c.backoffMin = time.Millisecond
	serveClient(t, c)
	testutil.Eventually(t, waitTimeout, "retries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return attempts >= 4
	})
	st := c.Status()
	if !strings.Contains(st.Error, "503") || !st.LastAnnounce.IsZero() {
		t.Errorf("Status while failing: %+v", st)
	}
	if n := logs.Count(slog.LevelWarn, "announcing to discovery server failed"); n != 1 {
		t.Errorf("%d Warn lines for one repeated error, want 1", n)
	}
	if n := logs.Count(slog.LevelDebug, "announcing to discovery server failed"); n < 2 {
		t.Errorf("%d Debug lines for repeats, want >= 2", n)
	}

	clk.Add(time.Hour) // the filler expires: room for a
	testutil.Eventually(t, waitTimeout, "a successful announcement", func() bool { return c.Status().Error == "" })
	if st := c.Status(); st.LastAnnounce.IsZero() {
		t.Errorf("Status after success: %+v", st)
	}
	if st := s.Stats(); st.Devices != 1 {
		t.Errorf("Stats: %+v", st)
	}
}

func TestBackoffSchedule(t *testing.T) {
	var got []time.Duration
	for _, failures := range []int{0, 1, 2, 3, 4, 5, 6, 7, 1000} {
		got = append(got, backoff(backoffMin, failures))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second,
		80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	if !slices.Equal(got, want) {
		t.Errorf("backoff %v, want %v", got, want)
	}
}

func TestReannounceAfterHeader(t *testing.T) {
	for h, want := range map[string]time.Duration{
		"600":                  10 * time.Minute,
		"1":                    time.Second,
		"0":                    defaultReannounce,
		"-5":                   defaultReannounce,
		"":                     defaultReannounce,
		"1.5":                  defaultReannounce,
		"86400":                24 * time.Hour,
		"86401":                24 * time.Hour,
		"99999999999999999999": defaultReannounce,
	} {
		if got := reannounceAfter(h); got != want {
			t.Errorf("Reannounce-After %q: %v, want %v", h, got, want)
		}
	}
}

// countRequests makes c count the requests it sends to its server.
func countRequests(c *Client) *atomic.Int32 {
	n := &atomic.Int32{}
	next := c.http.Transport
	c.http.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		return next.RoundTrip(r)
	})
	return n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestLookupCache: a device looked up before it announced itself is asked
// for again a second later, not after 10 s; so is one whose addresses just
// changed (a node announces its listen address at start and its relay a
// moment later), not after 60 s. The answers the caller gets are its own.
func TestLookupCache(t *testing.T) {
	s := startServer(t, ServerConfig{})
	clk := testutil.NewClock()
	a, b := newIdentity(t, "a"), newIdentity(t, "b")
	ra := newRawClient(t, s, a)
	cb := newClient(t, ClientConfig{Identity: b, Server: s.URL(), Now: clk.Now})
	ctx := context.Background()
	t0 := clk.Now()
	announce := func(addrs ...string) {
		t.Helper()
		if code, body, _ := ra.do(http.MethodPost, "", announceBody(t, addrs...)); code != 204 {
			t.Fatalf("announce: %d %s", code, body)
		}
	}
	// lookup checks the answer at the clock's time; no addresses: not found.
	lookup := func(want ...string) []string {
		t.Helper()
		got, err := cb.Lookup(ctx, a.ID)
		if len(want) == 0 {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("%v after the start: %q, %v; want not found", clk.Now().Sub(t0), got, err)
			}
			return nil
		}
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%v after the start: %q, %v; want %q", clk.Now().Sub(t0), got, err, want)
		}
		return got
	}
	// A new answer is asked for again a second later.
	const soon = time.Second
	lookup()
	announce("tcp://192.0.2.1:1")
	clk.Set(t0.Add(soon - time.Nanosecond))
	lookup()
	clk.Set(t0.Add(soon))
	t1 := clk.Now()
	got := lookup("tcp://192.0.2.1:1")
	got[0] = "mutated by the caller"

	announce("tcp://192.0.2.1:1", "relay://192.0.2.9:22067/?id="+b.ID.String())
	clk.Set(t1.Add(soon - time.Nanosecond))
	lookup("tcp://192.0.2.1:1")
	clk.Set(t1.Add(soon))
	lookup("tcp://192.0.2.1:1", "relay://192.0.2.9:22067/?id="+b.ID.String())
}

// TestLookupCacheBacksOff: an answer is cached for as long as the server
// has been giving it, at least a second and at most notFoundTTL or foundTTL:
// asked every second, the server is asked at gaps doubling from a second
// up to that cap.
func TestLookupCacheBacksOff(t *testing.T) {
	s := startServer(t, ServerConfig{})
	a, b := newIdentity(t, "a"), newIdentity(t, "b")
	if code, body, _ := newRawClient(t, s, a).do(http.MethodPost, "", announceBody(t, "tcp://192.0.2.1:1")); code != 204 {
		t.Fatalf("announce: %d %s", code, body)
	}
	for _, tc := range []struct {
		name string
		id   crypt.DeviceID
		want []int // the seconds at which the server is asked
	}{
		{"not found", b.ID, []int{0, 1, 2, 4, 8, 16, 26, 36, 46, 56, 66, 76, 86, 96, 106, 116, 126, 136, 146, 156, 166, 176}},
		{"found", a.ID, []int{0, 1, 2, 4, 8, 16, 32, 64, 124}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testutil.NewClock()
			c := newClient(t, ClientConfig{Identity: b, Server: s.URL(), Now: clk.Now})
			asked := countRequests(c)
			var got []int
			for sec := range 180 {
				before := asked.Load()
				if _, err := c.Lookup(context.Background(), tc.id); err != nil && !errors.Is(err, ErrNotFound) {
					t.Fatal(err)
				}
				if asked.Load() != before {
					got = append(got, sec)
				}
				clk.Add(time.Second)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("asked the server at %v s, want %v", got, tc.want)
			}
		})
	}
}

func TestLookupCancelled(t *testing.T) {
	s := startServer(t, ServerConfig{})
	c := newClient(t, ClientConfig{Identity: newIdentity(t, "a"), Server: s.URL()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Lookup(ctx, c.cfg.Identity.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled lookup: %v", err)
	}
}
