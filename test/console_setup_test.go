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
// route, before and after its password is set.
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
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("a console password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cli("console", "password", "--password-file", pw)
	check("after setup")
}

// TestConsoleSetupToken: a fresh daemon writes a one-time setup token to
// its home (mode 0600) and says where in its log, without the token;
// /setup refuses the password without it and takes it with it, and the
// token is gone then.
func TestConsoleSetupToken(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "a")
	path := filepath.Join(n.home, "setup-token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no setup token: %v\n%s", err, n.log.String())
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("setup-token mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	token := strings.TrimSpace(string(b))
	if !strings.Contains(n.log.String(), path) {
		t.Errorf("the log does not say where the setup token is:\n%s", n.log.String())
	}
	if token == "" || strings.Contains(n.log.String(), token) {
		t.Errorf("the setup token %q is empty or in the log", token)
	}
	c := newConsoleClient(t, n.GUI, "")
	for _, tok := range []string{"", "not the token"} {
		csrf := c.form("/setup")
		code, _, _ := c.do("POST", "/setup", "", url.Values{"csrf": {csrf}, "token": {tok}, "password": {consolePassword}, "confirm": {consolePassword}})
		if code != http.StatusForbidden {
			t.Errorf("setup with token %q: %d, want 403", tok, code)
		}
	}
	csrf := c.form("/setup")
	code, loc, body := c.do("POST", "/setup", "", url.Values{"csrf": {csrf}, "token": {token}, "password": {consolePassword}, "confirm": {consolePassword}})
	if code != http.StatusSeeOther || loc != "/" {
		t.Fatalf("setup with the token: %d to %q: %s", code, loc, body)
	}
	if _, body := getPage(t, c, "/"); !strings.Contains(body, n.ID) {
		t.Errorf("the dashboard after setup does not show the device ID:\n%s", body)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("setup-token still there after setup: %v", err)
	}
}

// TestConsolePasswordCLI: `lockstep console password` sets the password
// of a headless node over REST; the console login takes it then. A short
// password is refused with one line.
func TestConsolePasswordCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "a")
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("short\n"), 0o600)
	if r := run(t, n.home, "console", "password", "--password-file", short); r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "8 to 72") {
		t.Errorf("a short password: exit %d, stderr %q", r.code, r.stderr)
	}
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte(consolePassword+"\n"), 0o600)
	n.cli("console", "password", "--password-file", pw)
	if strings.Contains(n.log.String(), consolePassword) {
		t.Error("the password is in the log")
	}
	if _, err := os.Stat(filepath.Join(n.home, "setup-token")); !os.IsNotExist(err) {
		t.Errorf("setup-token still there once the password is set: %v", err)
	}

	c := newConsoleClient(t, n.GUI, "")
	if code, loc, _ := c.do("GET", "/", "", nil); code != http.StatusSeeOther || loc != "/login" {
		t.Fatalf("the console before login: %d to %q, want the login page", code, loc)
	}
	csrf := c.form("/login")
	if code, _, _ := c.do("POST", "/login", "", url.Values{"csrf": {csrf}, "password": {"not it"}}); code != http.StatusUnauthorized {
		t.Errorf("a wrong password: %d, want 401", code)
	}
	csrf = c.form("/login")
	if code, loc, _ := c.do("POST", "/login", "", url.Values{"csrf": {csrf}, "password": {consolePassword}}); code != http.StatusSeeOther || loc != "/" {
		t.Fatalf("login with the password set by the CLI: %d to %q", code, loc)
	}
	if _, body := getPage(t, c, "/"); !strings.Contains(body, n.ID) {
		t.Errorf("the dashboard does not show the device ID:\n%s", body)
	}

	// Setting it again replaces it (a forgotten password) and ends the
	// sessions logged in with the old one.
	pw2 := filepath.Join(dir, "pw2")
	os.WriteFile(pw2, []byte("another console password\n"), 0o600)
	n.cli("console", "password", "--password-file", pw2)
	if code, loc, _ := c.do("GET", "/", "", nil); code != http.StatusSeeOther || loc != "/login" {
		t.Errorf("the old session after the password changed: %d to %q, want the login page", code, loc)
	}
	csrf = c.form("/login")
	if code, _, _ := c.do("POST", "/login", "", url.Values{"csrf": {csrf}, "password": {"another console password"}}); code != http.StatusSeeOther {
		t.Errorf("login with the new password: %d", code)
	}
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
