package global

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"lockstep/crypt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newIdentity(t testing.TB, name string) *crypt.Identity {
	t.Helper()
	id, _, err := crypt.LoadOrCreateIdentity(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// startServer runs a server on 127.0.0.1 until the test ends. cfg.Identity
// defaults to a new identity.
func startServer(t testing.TB, cfg ServerConfig) *Server {
	t.Helper()
	if cfg.Identity == nil {
		cfg.Identity = newIdentity(t, "discovery")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := NewServer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func newClient(t testing.TB, cfg ClientConfig) *Client {
	t.Helper()
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rawClient makes HTTPS requests to s presenting id's certificate (none if
// id is nil).
type rawClient struct {
	t   testing.TB
	url string
	hc  *http.Client
}

func newRawClient(t testing.TB, s *Server, id *crypt.Identity) *rawClient {
	t.Helper()
	var cfg *tls.Config
	if id != nil {
		cfg = crypt.ClientTLSConfig(id, s.cfg.Identity.ID)
	} else {
		cfg = crypt.ClientTLSConfig(&crypt.Identity{}, s.cfg.Identity.ID)
		cfg.Certificates = nil
	}
	cfg.NextProtos = []string{"http/1.1"}
	return &rawClient{
		t:   t,
		url: "https://" + s.ln.Addr().String() + "/",
		hc:  &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}, Timeout: 10 * time.Second},
	}
}

// do sends a request and returns the status, body and headers; a transport
// error fails the test.
func (r *rawClient) do(method, query string, body []byte) (int, string, http.Header) {
	r.t.Helper()
	code, b, h, err := r.try(method, query, body)
	if err != nil {
		r.t.Fatal(err)
	}
	return code, b, h
}

func (r *rawClient) try(method, query string, body []byte) (int, string, http.Header, error) {
	req, err := http.NewRequest(method, r.url+query, bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, err
}

func (r *rawClient) lookup(id crypt.DeviceID) (int, string) {
	r.t.Helper()
	code, body, _ := r.do(http.MethodGet, "?device="+id.String(), nil)
	return code, body
}

// logRecorder is a slog.Handler keeping every record.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// count returns how many records at level have a message containing msg.
func (l *logRecorder) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if r.Level == level && strings.Contains(r.Message, msg) {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
