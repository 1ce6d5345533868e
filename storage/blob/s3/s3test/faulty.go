package s3test

import (
	"encoding/xml"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lockstep/storage/blob/s3"
)

// Faults say which requests a Proxy spoils, counting requests from 1 in the
// order they arrive. A request matched by several gets the first that
// applies, in the order of the fields. Zero fields spoil nothing.
type Faults struct {
	// FailEvery N answers every Nth request 503 SlowDown, with an S3 XML
	// error body, without passing it on.
	FailEvery int
	// ResetEvery N closes the connection of every Nth request without an
	// answer, with a TCP reset, before passing it on.
	ResetEvery int
	// StallEvery N holds every Nth request for Stall before passing it on.
	StallEvery int
	Stall      time.Duration
}

// ProxyCounts say what a Proxy did so far.
type ProxyCounts struct {
	Requests, Failed, Reset, Stalled int64
	// Conns is the connections clients opened to the proxy.
	Conns int64
}

// Proxy is an HTTP reverse proxy on 127.0.0.1 in front of a server, which
// spoils requests as its Faults say. It passes the client's Host header on
// unchanged, so SigV4 signatures made for the proxy's address verify at
// the server (which checks them against the Host header it receives).
// Its Faults may change at any time; it stops, and waits for every request
// it is handling, in the test's cleanup.
type Proxy struct {
	addr     string
	faults   atomic.Pointer[Faults]
	seq      atomic.Int64
	failed   atomic.Int64
	reset    atomic.Int64
	stalled  atomic.Int64
	conns    atomic.Int64
	closing  chan struct{}
	mu       sync.Mutex // guards stopped and handlers.Add
	stopped  bool
	handlers sync.WaitGroup
}

// NewProxy starts a proxy in front of the HTTP server at target (host:port)
// with no faults; tb's cleanup stops it.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{addr: ln.Addr().String(), closing: make(chan struct{})}
	p.faults.Store(&Faults{})
	transport := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", target
			r.Out.Host = r.In.Host // signed by the client
		},
		Transport: transport,
		ErrorLog:  quiet,
	}
	srv := &http.Server{Handler: p.handler(rp), ReadHeaderTimeout: 10 * time.Second, ErrorLog: quiet,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				p.conns.Add(1)
			}
		}}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		close(p.closing)
		srv.Close()
		<-served
		p.handlers.Wait()
		transport.CloseIdleConnections()
	})
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// SetFaults changes the faults from the next request on.
func (p *Proxy) SetFaults(f Faults) { p.faults.Store(&f) }

// Counts returns what the proxy did so far.
func (p *Proxy) Counts() ProxyCounts {
	return ProxyCounts{Requests: p.seq.Load(), Failed: p.failed.Load(), Reset: p.reset.Load(), Stalled: p.stalled.Load(), Conns: p.conns.Load()}
}

// quiet drops the reports of aborted requests, which faults cause on
// purpose.
var quiet = log.New(io.Discard, "", 0)

func every(n int, seq int64) bool { return n > 0 && seq%int64(n) == 0 }

func (p *Proxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			panic(http.ErrAbortHandler)
		}
		p.handlers.Add(1)
		p.mu.Unlock()
		defer p.handlers.Done()
		seq := p.seq.Add(1)
		f := p.faults.Load()
		switch {
		case every(f.FailEvery, seq):
			p.failed.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
				`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>`+
				`<Resource>%s</Resource><RequestId>faulty-%d</RequestId></Error>`, xmlEscape(r.URL.Path), seq)
			return
		case every(f.ResetEvery, seq):
			p.reset.Add(1)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(http.ErrAbortHandler)
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with a reset, not a FIN
			}
			conn.Close()
			return
		case every(f.StallEvery, seq):
			p.stalled.Add(1)
			t := time.NewTimer(f.Stall)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			case <-p.closing:
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// Faulty starts a proxy in front of the server and returns the Config of a
// new, empty bucket reached through it, and the proxy.
func (s *Server) Faulty(tb testing.TB, f Faults) (s3.Config, *Proxy) {
	tb.Helper()
	cfg := s.Bucket(tb)
	p := NewProxy(tb, cfg.Endpoint)
	p.SetFaults(f)
	cfg.Endpoint = p.Addr()
	return cfg, p
}
