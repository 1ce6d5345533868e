package global

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// waitTimeout bounds every wait for a state in these tests.
const waitTimeout = 10 * time.Second

func newIdentity(t testing.TB, name string) *crypt.Identity {
	t.Helper()
	id, _, err := crypt.LoadOrCreateIdentity(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return id
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
