package global

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

func announceBody(t testing.TB, addrs ...string) []byte {
	t.Helper()
	b, err := json.Marshal(announcementBody{Addresses: addrs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lookupAddrs(t testing.TB, body string) []string {
	t.Helper()
	var lb lookupBody
	if err := json.Unmarshal([]byte(body), &lb); err != nil {
		t.Fatalf("lookup body %q: %v", body, err)
	}
	if _, err := time.Parse(time.RFC3339, lb.Seen); err != nil {
		t.Fatalf("seen %q: %v", lb.Seen, err)
	}
	return lb.Addresses
}

func TestAnnounceThenLookup(t *testing.T) {
	s := startServer(t, ServerConfig{})
	a, b := newIdentity(t, "a"), newIdentity(t, "b")
	relay := "relay://192.0.2.7:22067/?id=" + newIdentity(t, "relay").ID.String()
	addrs := []string{"tcp://0.0.0.0:22100", "tcp://[::]:22101", "tcp://:22102", "tcp://198.51.100.1:22103", relay}
	ca := newClient(t, ClientConfig{Identity: a, Server: s.URL(), Addresses: func() []string { return addrs }})
	cb := newClient(t, ClientConfig{Identity: b, Server: s.URL()})
	ctx := context.Background()

	if _, err := cb.Lookup(ctx, a.ID); err != ErrNotFound {
		t.Fatalf("lookup before announcing: %v, want ErrNotFound", err)
	}
	next, err := ca.announce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next != DefaultTTL/3 {
		t.Errorf("Reannounce-After: %v, want %v", next, DefaultTTL/3)
	}
	cb = newClient(t, ClientConfig{Identity: b, Server: s.URL()}) // fresh cache
	got, err := cb.Lookup(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tcp://127.0.0.1:22100", "tcp://127.0.0.1:22101", "tcp://127.0.0.1:22102", "tcp://198.51.100.1:22103", relay}
	if !slices.Equal(got, want) {
		t.Errorf("lookup: %q, want %q", got, want)
	}
	if st := s.Stats(); st.Devices != 1 {
		t.Errorf("Stats: %+v, want 1 device", st)
	}

	// Re-announcing replaces.
	addrs = []string{"tcp://0.0.0.0:1"}
	if _, err := ca.announce(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = newClient(t, ClientConfig{Identity: b, Server: s.URL()}).Lookup(ctx, a.ID)
	if err != nil || !slices.Equal(got, []string{"tcp://127.0.0.1:1"}) {
		t.Errorf("after re-announce: %q, %v", got, err)
	}

	// An empty announcement forgets the device.
	addrs = nil
	if _, err := ca.announce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, ClientConfig{Identity: b, Server: s.URL()}).Lookup(ctx, a.ID); err != ErrNotFound {
		t.Errorf("after empty announcement: %v, want ErrNotFound", err)
	}
	if st := s.Stats(); st.Devices != 0 {
		t.Errorf("Stats: %+v, want 0 devices", st)
	}
}

func TestCannotAnnounceForAnotherDevice(t *testing.T) {
	s := startServer(t, ServerConfig{})
	a, b := newIdentity(t, "a"), newIdentity(t, "b")
	ra, rb := newRawClient(t, s, a), newRawClient(t, s, b)

	forged := fmt.Sprintf(`{"device": %q, "addresses": ["tcp://203.0.113.9:1"]}`, b.ID)
	code, body, _ := ra.do(http.MethodPost, "", []byte(forged))
	if code != http.StatusForbidden {
		t.Fatalf("forged announcement: %d %s, want 403", code, body)
	}
	var eb errorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error != "a device can only announce its own addresses" {
		t.Errorf("403 body %q", body)
	}
	if code, body := ra.lookup(b.ID); code != http.StatusNotFound {
		t.Errorf("B after forged announcement: %d %s, want 404", code, body)
	}
	if code, body := ra.lookup(a.ID); code != http.StatusNotFound {
		t.Errorf("A after its forged announcement: %d %s, want 404", code, body)
	}

	// B's real entry is unchanged by another forgery.
	if code, body, _ := rb.do(http.MethodPost, "", announceBody(t, "tcp://198.51.100.2:2")); code != http.StatusNoContent {
		t.Fatalf("B announcing: %d %s", code, body)
	}
	if code, body, _ := ra.do(http.MethodPost, "", []byte(forged)); code != http.StatusForbidden {
		t.Fatalf("forged announcement: %d %s, want 403", code, body)
	}
	code, body = ra.lookup(b.ID)
	if got := lookupAddrs(t, body); code != http.StatusOK || !slices.Equal(got, []string{"tcp://198.51.100.2:2"}) {
		t.Errorf("B after forgery: %d %q", code, got)
	}

	// Naming oneself is allowed.
	own := fmt.Sprintf(`{"device": %q, "addresses": ["tcp://203.0.113.9:1"]}`, a.ID)
	if code, body, _ := ra.do(http.MethodPost, "", []byte(own)); code != http.StatusNoContent {
		t.Errorf("announcement naming itself: %d %s, want 204", code, body)
	}
}

func TestNoClientCertificate(t *testing.T) {
	s := startServer(t, ServerConfig{})
	r := newRawClient(t, s, nil)
	b := newIdentity(t, "b")
	code, body, _, err := r.try(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:1"))
	if err == nil {
		t.Errorf("announcing without a certificate: %d %s, want a failure", code, body)
	}
	if code, body, _, err := r.try(http.MethodGet, "?device="+b.ID.String(), nil); err == nil {
		t.Errorf("looking up without a certificate: %d %s, want a failure", code, body)
	}
	if st := s.Stats(); st.Devices != 0 {
		t.Errorf("Stats: %+v", st)
	}
}

func TestExpiry(t *testing.T) {
	clk := testutil.NewClock()
	const ttl = 30 * time.Minute
	s := startServer(t, ServerConfig{TTL: ttl, Now: clk.Now})
	a := newIdentity(t, "a")
	r := newRawClient(t, s, a)
	t0 := clk.Now()
	if code, body, _ := r.do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:5")); code != http.StatusNoContent {
		t.Fatalf("announce: %d %s", code, body)
	}
	for _, tc := range []struct {
		at   time.Duration
		live bool
	}{{ttl - time.Nanosecond, true}, {ttl, false}, {ttl + time.Nanosecond, false}} {
		clk.Set(t0.Add(tc.at))
		if got := s.Stats().Devices; got != map[bool]int{true: 1}[tc.live] {
			t.Errorf("at TTL%+v: Stats.Devices = %d", tc.at-ttl, got)
		}
		code, body := r.lookup(a.ID)
		if tc.live && (code != http.StatusOK || lookupAddrs(t, body)[0] != "tcp://127.0.0.1:5") {
			t.Errorf("at TTL%+v: %d %s, want found", tc.at-ttl, code, body)
		}
		if !tc.live && code != http.StatusNotFound {
			t.Errorf("at TTL%+v: %d %s, want 404", tc.at-ttl, code, body)
		}
	}
	// Re-announcing restarts the TTL.
	if code, body, _ := r.do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:6")); code != http.StatusNoContent {
		t.Fatalf("announce: %d %s", code, body)
	}
	clk.Add(ttl - time.Nanosecond)
	if code, body := r.lookup(a.ID); code != http.StatusOK || lookupAddrs(t, body)[0] != "tcp://127.0.0.1:6" {
		t.Errorf("after re-announcing: %d %s", code, body)
	}
}

func TestSweep(t *testing.T) {
	s := startServer(t, ServerConfig{TTL: 40 * time.Millisecond})
	r := newRawClient(t, s, newIdentity(t, "a"))
	if code, body, _ := r.do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:5")); code != http.StatusNoContent {
		t.Fatalf("announce: %d %s", code, body)
	}
	// No lookup touches the entry: only the sweep can drop it.
	testutil.Eventually(t, waitTimeout, "the sweep", func() bool {
		s.reg.mu.Lock()
		defer s.reg.mu.Unlock()
		return len(s.reg.entries) == 0
	})
}

func TestMaxDevices(t *testing.T) {
	clk := testutil.NewClock()
	const max = 3
	s := startServer(t, ServerConfig{MaxDevices: max, TTL: time.Hour, Now: clk.Now})
	var clients []*rawClient
	for i := range max + 1 {
		clients = append(clients, newRawClient(t, s, newIdentity(t, fmt.Sprint("d", i))))
	}
	for i, r := range clients[:max] {
		if code, body, _ := r.do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:1")); code != http.StatusNoContent {
			t.Fatalf("device %d of %d: %d %s", i+1, max, code, body)
		}
	}
	if code, body, _ := clients[max].do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:1")); code != http.StatusServiceUnavailable {
		t.Fatalf("device %d of %d: %d %s, want 503", max+1, max, code, body)
	}
	// Known devices may still re-announce.
	if code, body, _ := clients[0].do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:2")); code != http.StatusNoContent {
		t.Fatalf("re-announce when full: %d %s", code, body)
	}
	// Once entries expire there is room again.
	clk.Add(time.Hour)
	if code, body, _ := clients[max].do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:1")); code != http.StatusNoContent {
		t.Fatalf("new device after expiry: %d %s", code, body)
	}
	if st := s.Stats(); st.Devices != 1 {
		t.Errorf("Stats: %+v, want 1", st)
	}
}

func TestAnnouncementLimits(t *testing.T) {
	s := startServer(t, ServerConfig{})
	a := newIdentity(t, "a")
	r := newRawClient(t, s, a)
	relayID := newIdentity(t, "relay").ID.String()

	addrs := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("tcp://192.0.2.1:%d", i+1))
		}
		return out
	}
	long := func(n int) string { // a valid tcp:// address of n bytes
		prefix, suffix := "tcp://", ":1"
		host := []byte(strings.Repeat("h", n-len(prefix)-len(suffix)))
		for i := 63; i < len(host)-1; i += 64 {
			host[i] = '.' // DNS labels are at most 63 bytes
		}
		return prefix + string(host) + suffix
	}
	padded := func(n int) []byte { // a valid body of n bytes
		b := announceBody(t, "tcp://192.0.2.1:9")
		return append(b[:len(b)-1], append([]byte(strings.Repeat(" ", n-len(b))), '}')...)
	}
	for _, tc := range []struct {
		name string
		body []byte
		code int
	}{
		{"15 addresses", announceBody(t, addrs(15)...), 204},
		{"16 addresses", announceBody(t, addrs(16)...), 204},
		{"17 addresses", announceBody(t, addrs(17)...), 400},
		{"255-byte address", announceBody(t, long(255)), 204},
		{"256-byte address", announceBody(t, long(256)), 204},
		{"257-byte address", announceBody(t, long(257)), 400},
		{"16 KiB-1 body", padded(MaxBodySize - 1), 204},
		{"16 KiB body", padded(MaxBodySize), 204},
		{"16 KiB+1 body", padded(MaxBodySize + 1), 400},
		{"bad scheme", announceBody(t, "udp://192.0.2.1:1"), 400},
		{"https scheme", announceBody(t, "https://192.0.2.1:1"), 400},
		{"no port", announceBody(t, "tcp://192.0.2.1"), 400},
		{"port 0", announceBody(t, "tcp://192.0.2.1:0"), 400},
		{"port 65536", announceBody(t, "tcp://192.0.2.1:65536"), 400},
		{"tcp with query", announceBody(t, "tcp://192.0.2.1:1?id=x"), 400},
		{"relay without id", announceBody(t, "relay://192.0.2.1:1/"), 400},
		{"relay with bad id", announceBody(t, "relay://192.0.2.1:1/?id=AAAA"), 400},
		{"relay to unspecified host", announceBody(t, "relay://0.0.0.0:1/?id="+relayID), 400},
		{"not JSON", []byte("tcp://192.0.2.1:1"), 400},
		{"no addresses", []byte(`{}`), 400},
		{"null addresses", []byte(`{"addresses": null}`), 400},
		{"trailing data", []byte(`{"addresses": []} {}`), 400},
		{"malformed device", []byte(`{"addresses": [], "device": "nope"}`), 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Start from a known entry, which a refused body must leave alone.
			if code, body, _ := r.do(http.MethodPost, "", announceBody(t, "tcp://192.0.2.200:7")); code != http.StatusNoContent {
				t.Fatalf("setup: %d %s", code, body)
			}
			code, body, _ := r.do(http.MethodPost, "", tc.body)
			if code != tc.code {
				t.Fatalf("%d %s, want %d", code, body, tc.code)
			}
			var eb errorBody
			if code == 400 && (json.Unmarshal([]byte(body), &eb) != nil || eb.Error == "") {
				t.Errorf("400 without an error message: %q", body)
			}
			code, body = r.lookup(a.ID)
			if code != 200 {
				t.Fatalf("lookup: %d %s", code, body)
			}
			got := lookupAddrs(t, body)
			if tc.code == 400 && !slices.Equal(got, []string{"tcp://192.0.2.200:7"}) {
				t.Errorf("refused body changed the entry: %q", got)
			} else if tc.code != 400 && slices.Contains(got, "tcp://192.0.2.200:7") {
				t.Errorf("accepted body did not replace the entry: %q", got)
			}
		})
	}
}

func TestLookupRequests(t *testing.T) {
	s := startServer(t, ServerConfig{})
	r := newRawClient(t, s, newIdentity(t, "a"))
	for _, tc := range []struct {
		method, query string
		code          int
	}{
		{http.MethodGet, "?device=nope", 400},
		{http.MethodGet, "", 400},
		{http.MethodGet, "?device=" + newIdentity(t, "b").ID.String(), 404},
		{http.MethodPut, "", 405},
		{http.MethodDelete, "", 405},
	} {
		code, body, h := r.do(tc.method, tc.query, nil)
		if code != tc.code {
			t.Errorf("%s /%s: %d %s, want %d", tc.method, tc.query, code, body, tc.code)
		}
		if h.Get("Content-Type") != "application/json" {
			t.Errorf("%s /%s: Content-Type %q", tc.method, tc.query, h.Get("Content-Type"))
		}
	}
	r.url += "other"
	if code, _, _ := r.do(http.MethodGet, "", nil); code != 404 {
		t.Errorf("GET /other: %d, want 404", code)
	}
}

func TestServeLifecycle(t *testing.T) {
	id := newIdentity(t, "s")
	s, err := NewServer(context.Background(), ServerConfig{Identity: id, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://" + s.ln.Addr().String() + "/?id=" + id.ID.String(); s.URL() != want {
		t.Errorf("URL %q, want %q", s.URL(), want)
	}
	if _, err := NewServer(context.Background(), ServerConfig{Identity: id, Listen: s.ln.Addr().String()}); err == nil {
		t.Error("binding a taken port succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	testutil.Eventually(t, waitTimeout, "the server", func() bool {
		code, _, _, err := newRawClient(t, s, id).try(http.MethodGet, "?device="+id.ID.String(), nil)
		return err == nil && code == 404
	})
	if err := s.Serve(ctx); err == nil {
		t.Error("second Serve succeeded")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
	if _, _, _, err := newRawClient(t, s, id).try(http.MethodGet, "", nil); err == nil {
		t.Error("server still answers after Serve returned")
	}

	unserved, err := NewServer(context.Background(), ServerConfig{Identity: id, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := unserved.Close(); err != nil {
		t.Error(err)
	}
	if _, err := NewServer(context.Background(), ServerConfig{Listen: "127.0.0.1:0"}); err == nil {
		t.Error("NewServer without identity succeeded")
	}
}
