package test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// consoleClient is a browser-like HTTP client: it keeps cookies, sends
// the Host header it is given and does not follow redirects.
type consoleClient struct {
	t    *testing.T
	base string
	host string // "" for the base URL's
	http *http.Client
}

func newConsoleClient(t *testing.T, base, host string) *consoleClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &consoleClient{t: t, base: base, host: host, http: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request (a form when form is not nil, the API key when key
// is not empty) and returns the status, the Location and the body.
func (c *consoleClient) do(method, path, key string, form url.Values) (int, string, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.host != "" {
		req.Host = c.host
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// form GETs path and returns the CSRF token of its form.
func (c *consoleClient) form(path string) string {
	c.t.Helper()
	code, _, body := c.do("GET", path, "", nil)
	m := csrfInput.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("GET %s: %d, no form in %s", path, code, body)
	}
	return m[1]
}

// TestConsoleRefusesForeignHost: the real daemon refuses every request
// whose Host is not its address, localhost or a --gui-host name (a DNS
// rebinding page reaching 127.0.0.1 under its own name), on every kind of
// route.
func TestConsoleRefusesForeignHost(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "a", "--gui-host", "console.test")
	port := n.GUI[strings.LastIndex(n.GUI, ":")+1:]
	routes := []struct {
		method, path string
		key          bool
	}{
		{"GET", "/healthz", false}, {"GET", "/assets/console.css", false},
		{"GET", "/setup", false}, {"POST", "/setup", false},
		{"GET", "/login", false}, {"POST", "/login", false},
		{"GET", "/", false}, {"GET", "/rest/status", true},
		{"POST", "/rest/devices", true}, {"PUT", "/rest/console/password", true},
		{"GET", "/metrics", true},
	}
	check := func(when string) {
		t.Helper()
		for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.nip.example:" + port} {
			c := newConsoleClient(t, n.GUI, host)
			for _, r := range routes {
				key := ""
				if r.key {
					key = n.apiKey
				}
				form := url.Values{}
				if r.method == "GET" {
					form = nil
				}
				if code, _, _ := c.do(r.method, r.path, key, form); code != http.StatusMisdirectedRequest {
					t.Errorf("%s: %s %s with Host %s: %d, want 421", when, r.method, r.path, host, code)
				}
			}
		}
		for _, host := range []string{"", "localhost:" + port, "console.test:" + port, "console.test"} {
			c := newConsoleClient(t, n.GUI, host)
			if code, _, _ := c.do("GET", "/healthz", "", nil); code != http.StatusOK {
				t.Errorf("%s: /healthz with Host %q: %d, want 200", when, host, code)
			}
		}
	}
	check("before setup")
}

// getPage GETs a console page and fails unless it answers 200.
func getPage(t *testing.T, c *consoleClient, path string) (int, string) {
	t.Helper()
	code, loc, body := c.do("GET", path, "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d (to %q)", path, code, loc)
	}
	return code, body
}
