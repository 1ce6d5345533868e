package web

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// serveOn runs a Server for cfg (its DB, ID, connections, engine, key and
// logger filled in when unset) bound to addr until the test ends.
func serveOn(t *testing.T, addr string, cfg Config) *Server {
	t.Helper()
	if cfg.DB == nil {
		database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { database.Close() })
		cfg.DB = database
	}
	if cfg.ID == (crypt.DeviceID{}) {
		cfg.ID[0] = 7
	}
	if cfg.Conns == nil {
		cfg.Conns = fakeConns{}
	}
	if cfg.Engine == nil {
		cfg.Engine = fakeEngine{}
	}
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(context.Background(), addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
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

// hostRequest sends method path to the server at base with the Host
// header host, the API key when key, and returns the status code.
func hostRequest(t *testing.T, base, method, path, host string, key bool, form url.Values) int {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if key {
		req.Header.Set("X-API-Key", testKey)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// routeClasses are one route of every kind the console serves: health,
// assets, first run, login, console pages, REST (read and write), metrics
// and a path that matches no route.
var routeClasses = []struct {
	method, path string
	key          bool
	form         url.Values
}{
	{"GET", "/healthz", false, nil},
	{"GET", "/assets/console.css", false, nil},
	{"GET", "/setup", false, nil},
	{"POST", "/setup", false, url.Values{"password": {testPassword}, "confirm": {testPassword}, "token": {testKey}}},
	{"GET", "/login", false, nil},
	{"POST", "/login", false, url.Values{"password": {testPassword}}},
	{"GET", "/", false, nil},
	{"GET", "/devices", false, nil},
	{"GET", "/rest/status", true, nil},
	{"POST", "/rest/devices", true, nil},
	{"GET", "/rest/events", false, nil},
	{"GET", "/metrics", true, nil},
	{"GET", "/no-such-page", false, nil},
}

// TestForeignHostRefused: a request whose Host is not the console's own
// address, localhost or a configured name is refused on every route, with
// the password not set yet (the DNS rebinding of a fresh node) and set.
func TestForeignHostRefused(t *testing.T) {
	for _, setPassword := range []bool{false, true} {
		s := serveOn(t, "127.0.0.1:0", Config{})
		if setPassword {
			h, err := hashPassword(testPassword)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.cfg.DB.SetSetting(context.Background(), passwordSetting, h); err != nil {
				t.Fatal(err)
			}
		}
		base := s.URL()
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
		for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port, "localhost.evil.example:" + port} {
			for _, r := range routeClasses {
				if code := hostRequest(t, base, r.method, r.path, host, r.key, r.form); code != http.StatusMisdirectedRequest {
					t.Errorf("password set %v: %s %s with Host %q: %d, want 421", setPassword, r.method, r.path, host, code)
				}
			}
		}
		if _, err := s.cfg.DB.Setting(context.Background(), passwordSetting); !setPassword && err == nil {
			t.Fatal("a request with a foreign Host set the admin password")
		}
		// Its own address, loopback and localhost are served.
		for _, host := range []string{"127.0.0.1:" + port, "[::1]:" + port, "localhost:" + port, "LOCALHOST:" + port, "localhost"} {
			if code := hostRequest(t, base, "GET", "/healthz", host, false, nil); code != http.StatusOK {
				t.Errorf("Host %q: %d, want 200", host, code)
			}
			if code := hostRequest(t, base, "GET", "/rest/status", host, true, nil); code != http.StatusOK {
				t.Errorf("Host %q: /rest/status %d, want 200", host, code)
			}
		}
		// HTTP/1.0 may leave Host out: that is no address of the console.
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, "GET /healthz HTTP/1.0\r\n\r\n")
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if !strings.Contains(line, " 421 ") {
			t.Errorf("HTTP/1.0 without Host: %q, want 421", line)
		}
		// The right name on another port is another server.
		if code := hostRequest(t, base, "GET", "/healthz", "127.0.0.1:1", false, nil); code != http.StatusMisdirectedRequest {
			t.Errorf("Host on another port: %d, want 421", code)
		}
	}
}

// TestHostPolicy: which Host headers a console answers to, bound to
// loopback, to one address and to every address, with configured names.
func TestHostPolicy(t *testing.T) {
	loop := newHostPolicy(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8385}, false, []string{"nas.lan", "Console.Example.:8443"})
	one := newHostPolicy(&net.TCPAddr{IP: net.ParseIP("192.168.1.5"), Port: 8385}, true, nil)
	all := newHostPolicy(&net.TCPAddr{IP: net.IPv6unspecified, Port: 443}, true, nil)
	for _, tc := range []struct {
		p    hostPolicy
		host string
		want bool
	}{
		{loop, "127.0.0.1:8385", true},
		{loop, "127.0.0.2:8385", true},
		{loop, "[::1]:8385", true},
		{loop, "localhost:8385", true},
		{loop, "localhost.:8385", true},
		{loop, "localhost", true},
		{loop, "nas.lan:8385", true},
		{loop, "NAS.LAN", true},
		{loop, "console.example:8443", true},
		{loop, "nas.lan:8443", false},
		{loop, "console.example", false},
		{loop, "console.example:8385", false},
		{loop, "127.0.0.1", false},
		{loop, "127.0.0.1:8386", false},
		{loop, "192.168.1.5:8385", false},
		{loop, "evil.example:8385", false},
		{loop, "localhost:8386", false},
		{loop, "", false},
		{loop, ":8385", false},
		{one, "192.168.1.5:8385", true},
		{one, "127.0.0.1:8385", true},
		{one, "192.168.1.6:8385", false},
		{one, "router.lan:8385", false},
		{all, "10.1.2.3", true},
		{all, "10.1.2.3:443", true},
		{all, "[fe80::1]:443", true},
		{all, "[fe80::1]", true},
		{all, "10.1.2.3:444", false},
		{all, "evil.example", false},
	} {
		if got := tc.p.allows(tc.host); got != tc.want {
			t.Errorf("policy on port %s bound to %v: allows(%q) = %v, want %v", tc.p.port, tc.p.bound, tc.host, got, tc.want)
		}
	}
}

// TestGUIHostServed: a console told its name (serve --gui-host) answers
// to it, and still refuses other names.
func TestGUIHostServed(t *testing.T) {
	s := serveOn(t, "127.0.0.1:0", Config{Hosts: []string{"nas.lan"}})
	base := s.URL()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	if code := hostRequest(t, base, "GET", "/rest/status", "nas.lan:"+port, true, nil); code != http.StatusOK {
		t.Errorf("the configured name: %d, want 200", code)
	}
	if code := hostRequest(t, base, "GET", "/rest/status", "other.lan:"+port, true, nil); code != http.StatusMisdirectedRequest {
		t.Errorf("another name: %d, want 421", code)
	}
}

func TestCheckGUIHost(t *testing.T) {
	for _, ok := range []string{"nas.lan", "nas.lan:8443", "192.168.1.5", "[::1]:8385", "[fe80::1]", "console"} {
		if err := CheckGUIHost(ok); err != nil {
			t.Errorf("CheckGUIHost(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "nas.lan:0", "nas.lan:x", "http://nas.lan", "a b", ":8385", "[]", "[nas]x"} {
		if err := CheckGUIHost(bad); err == nil {
			t.Errorf("CheckGUIHost(%q) accepted", bad)
		}
	}
}
