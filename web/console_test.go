package web

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/connections"
	"lockstep/sync/engine"
)

const testKey = "test-api-key"

type fakeConns struct{}

func (fakeConns) Connections() []connections.Info { return nil }
func (fakeConns) Reload()                         {}

// fakeEngine runs only the folder "busy"; the console pages only ask for
// FolderStatus and Reload.
// fakeEngine is both Engine and Backup; what a test does not set panics.
type fakeEngine struct {
	Engine
	Backup
}

// Status reports no encrypted shares.
func (fakeEngine) Status(string) backup.Status { return backup.Status{} }

// FolderStatus reports "busy" as syncing and needing 1234 bytes.
func (fakeEngine) FolderStatus(id string) (engine.FolderStatus, bool) {
	if id == "busy" {
		st := engine.FolderStatus{State: "syncing"}
		st.NeedFiles, st.NeedBytes = 2, 1234
		return st, true
	}
	return engine.FolderStatus{}, false
}

func (fakeEngine) Reload(context.Context) error { return nil }

// newTestServer serves a Server over real SQLite on a loopback port.
func newTestServer(t *testing.T) (*httptest.Server, *db.DB) {
	t.Helper()
	return newTestServerEngine(t, fakeEngine{})
}

// backupOf is the Backup side of a fake engine that has one, else nil.
func backupOf(eng Engine) Backup {
	b, _ := eng.(Backup)
	return b
}

// newTestServerEngine is newTestServer with eng as the engine.
func newTestServerEngine(t *testing.T, eng Engine) (*httptest.Server, *db.DB) {
	t.Helper()
	database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close() })
	var id crypt.DeviceID
	id[0] = 7
	s, err := New(context.Background(), "127.0.0.1:0", Config{ID: id, DB: database, Conns: fakeConns{}, Engine: eng, Backup: backupOf(eng), APIKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := serveTest(t, s)
	return ts, database
}

// serveTest serves s on its own listener, so that requests carry its
// address in Host, until the test ends.
func serveTest(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Listener.Close()
	ts.Listener = s.ln
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// browser is an HTTP client with cookies that does not follow redirects.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// formToken GETs path and returns the CSRF token of its form.
func formToken(t *testing.T, c *http.Client, base, path string) string {
	t.Helper()
	resp, err := c.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(b)
	if m == nil {
		t.Fatalf("GET %s: %s: no CSRF token in %s", path, resp.Status, b)
	}
	return string(m[1])
}

func post(t *testing.T, c *http.Client, u string, form url.Values) *http.Response {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

const testPassword = "correct horse battery"

// setUp sets the admin password through /setup and returns the logged-in
// browser.
func setUp(t *testing.T, base string) *http.Client {
	t.Helper()
	c := browser(t)
	tok := formToken(t, c, base, "/setup")
	resp := post(t, c, base+"/setup", url.Values{"csrf": {tok}, "token": {testKey}, "password": {testPassword}, "confirm": {testPassword}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("setup: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	return c
}

func TestFirstRunRedirectsToSetup(t *testing.T) {
	ts, _ := newTestServer(t)
	c := browser(t)
	for _, p := range []string{"/", "/devices", "/folders", "/login"} {
		resp, err := c.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/setup" {
			t.Errorf("GET %s before setup: %s to %q, want 303 to /setup", p, resp.Status, resp.Header.Get("Location"))
		}
	}
}

func TestSetupOnlyOnce(t *testing.T) {
	ts, database := newTestServer(t)
	setUp(t, ts.URL)
	hash, err := database.Setting(context.Background(), passwordSetting)
	if err != nil || !strings.HasPrefix(hash, "$2") || strings.Contains(hash, testPassword) {
		t.Fatalf("stored password %q, %v: want a bcrypt hash", hash, err)
	}
	// A second setup, even with a valid form token, is refused.
	c := browser(t)
	resp, err := c.Get(ts.URL + "/setup")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("GET /setup after setup: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	tok := formToken(t, c, ts.URL, "/login")
	resp = post(t, c, ts.URL+"/setup", url.Values{"csrf": {tok}, "password": {"another password"}, "confirm": {"another password"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("second setup: %s, want 403", resp.Status)
	}
	if again, _ := database.Setting(context.Background(), passwordSetting); again != hash {
		t.Error("second setup changed the password")
	}
}

func TestSetupPasswordLength(t *testing.T) {
	ts, database := newTestServer(t)
	c := browser(t)
	for _, n := range []int{minPassword - 1, maxPassword + 1} {
		pw := strings.Repeat("p", n)
		tok := formToken(t, c, ts.URL, "/setup")
		if resp := post(t, c, ts.URL+"/setup", url.Values{"csrf": {tok}, "token": {testKey}, "password": {pw}, "confirm": {pw}}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("setup with %d bytes: %s, want 400", n, resp.Status)
		}
	}
	if _, err := database.Setting(context.Background(), passwordSetting); err == nil {
		t.Fatal("a refused setup stored a password")
	}
	tok := formToken(t, c, ts.URL, "/setup")
	pw := strings.Repeat("p", minPassword)
	if resp := post(t, c, ts.URL+"/setup", url.Values{"csrf": {tok}, "token": {testKey}, "password": {pw}, "confirm": {pw + "x"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("setup with different passwords: %s, want 400", resp.Status)
	}
	tok = formToken(t, c, ts.URL, "/setup")
	if resp := post(t, c, ts.URL+"/setup", url.Values{"csrf": {tok}, "token": {testKey}, "password": {pw}, "confirm": {pw}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("setup with %d bytes: %s, want 303", minPassword, resp.Status)
	}
}

// TestUnauthenticatedRefused: every route but login, setup, health and
// assets refuses a request without a session or the API key.
func TestUnauthenticatedRefused(t *testing.T) {
	ts, _ := newTestServer(t)
	setUp(t, ts.URL)
	c := browser(t)
	routes := []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/devices"}, {"GET", "/folders"}, {"GET", "/folders/x"},
		{"GET", "/qr.png"}, {"GET", "/fragments/devices"}, {"GET", "/fragments/folders"},
		{"POST", "/devices"}, {"POST", "/folders"}, {"POST", "/folders/share"},
		{"POST", "/pending/accept"}, {"POST", "/logout"},
		{"GET", "/metrics"}, {"GET", "/rest/status"}, {"GET", "/rest/devices"}, {"POST", "/rest/devices"},
		{"GET", "/rest/folders"}, {"POST", "/rest/folders"}, {"GET", "/rest/pending"},
	}
	for _, r := range routes {
		req, _ := http.NewRequest(r.method, ts.URL+r.path, strings.NewReader("id=x"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
		case resp.StatusCode == http.StatusSeeOther && resp.Header.Get("Location") == "/login":
		default:
			t.Errorf("%s %s unauthenticated: %s %q", r.method, r.path, resp.Status, body)
		}
	}
	// The open routes answer.
	for _, p := range []string{"/healthz", "/login", "/assets/htmx.min.js", "/assets/console.css"} {
		resp, err := c.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s, want 200", p, resp.Status)
		}
	}
}

func TestSessionAndAPIKeyAccepted(t *testing.T) {
	ts, _ := newTestServer(t)
	c := setUp(t, ts.URL)
	for _, p := range []string{"/", "/devices", "/folders", "/fragments/devices", "/qr.png", "/metrics", "/rest/status"} {
		resp, err := c.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with a session: %s %s", p, resp.Status, body)
		}
		if p == "/metrics" && !strings.Contains(string(body), "lockstep_folders 0") {
			t.Errorf("/metrics lacks lockstep_folders 0:\n%s", body)
		}
	}
	req, _ := http.NewRequest("GET", ts.URL+"/rest/status", nil)
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("REST with the API key: %s", resp.Status)
	}
	req.Header.Set("X-API-Key", testKey+"x")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("REST with a wrong API key: %s, want 401", resp.Status)
	}
	// Logging out ends the session.
	tok := formToken(t, c, ts.URL, "/")
	if resp := post(t, c, ts.URL+"/logout", url.Values{"csrf": {tok}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %s", resp.Status)
	}
	if resp, err = c.Get(ts.URL + "/"); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("GET / after logout: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
}

func TestCSRFRequired(t *testing.T) {
	ts, database := newTestServer(t)
	c := setUp(t, ts.URL)
	tok := formToken(t, c, ts.URL, "/folders")
	dir := t.TempDir()
	for _, bad := range []url.Values{
		{"id": {"docs"}, "path": {dir}},
		{"id": {"docs"}, "path": {dir}, "csrf": {""}},
		{"id": {"docs"}, "path": {dir}, "csrf": {tok + "x"}},
		{"id": {"docs"}, "path": {dir}, "csrf": {tok[:len(tok)-1]}},
	} {
		if resp := post(t, c, ts.URL+"/folders", bad); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST /folders with csrf %q: %s, want 403", bad.Get("csrf"), resp.Status)
		}
	}
	if fs, _ := database.Folders(context.Background()); len(fs) != 0 {
		t.Fatalf("a refused form added %d folders", len(fs))
	}
	if resp := post(t, c, ts.URL+"/folders", url.Values{"id": {"docs"}, "path": {dir}, "csrf": {tok}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /folders with the token: %s", resp.Status)
	}
	if fs, _ := database.Folders(context.Background()); len(fs) != 1 {
		t.Fatalf("the form added %d folders, want 1", len(fs))
	}
	// Another session's token is not this one's.
	other := browser(t)
	otok := formToken(t, other, ts.URL, "/login")
	post(t, other, ts.URL+"/login", url.Values{"csrf": {otok}, "password": {testPassword}})
	if resp := post(t, other, ts.URL+"/logout", url.Values{"csrf": {tok}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout with another session's token: %s, want 403", resp.Status)
	}
	// Login and setup forms need their double-submit token.
	if resp := post(t, browser(t), ts.URL+"/login", url.Values{"password": {testPassword}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("login without a token: %s, want 403", resp.Status)
	}
	// A session's unsafe REST call needs X-CSRF-Token.
	req, _ := http.NewRequest("POST", ts.URL+"/rest/folders", strings.NewReader(`{"id":"b","path":"/nowhere/b"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("session REST POST without X-CSRF-Token: %s, want 403", resp.Status)
	}
}

func TestLoginRateLimit(t *testing.T) {
	ts, _ := newTestServer(t)
	setUp(t, ts.URL)
	c := browser(t)
	login := func(pw string) int {
		tok := formToken(t, c, ts.URL, "/login")
		return post(t, c, ts.URL+"/login", url.Values{"csrf": {tok}, "password": {pw}}).StatusCode
	}
	for i := 1; i <= loginFailures; i++ {
		if code := login("wrong password"); code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i, code)
		}
	}
	if code := login("wrong password"); code != http.StatusTooManyRequests {
		t.Fatalf("wrong password %d: %d, want 429", loginFailures+1, code)
	}
	// Refused even with the right password until the window passes.
	if code := login(testPassword); code != http.StatusTooManyRequests {
		t.Fatalf("right password while limited: %d, want 429", code)
	}
}

func TestLoginWindow(t *testing.T) {
	ss := newSessions()
	now := ss.now()
	ss.now = func() time.Time { return now }
	for range loginFailures - 1 {
		ss.failLogin("a")
	}
	if !ss.allowLogin("a") {
		t.Fatal("refused after n-1 failures")
	}
	ss.failLogin("a")
	if ss.allowLogin("a") {
		t.Fatal("allowed after n failures")
	}
	if !ss.allowLogin("b") {
		t.Fatal("another client is limited")
	}
	now = now.Add(loginWindow - time.Second)
	if ss.allowLogin("a") {
		t.Fatal("allowed before the window passed")
	}
	now = now.Add(2 * time.Second)
	if !ss.allowLogin("a") {
		t.Fatal("still refused after the window passed")
	}
}

func TestSessionExpiry(t *testing.T) {
	ss := newSessions()
	now := ss.now()
	ss.now = func() time.Time { return now }
	id := ss.create()
	now = now.Add(sessionTTL - time.Second)
	if _, ok := ss.get(id); !ok {
		t.Fatal("session expired early")
	}
	now = now.Add(sessionTTL + time.Second)
	if _, ok := ss.get(id); ok {
		t.Fatal("session outlived its TTL")
	}
	if _, ok := ss.get(""); ok {
		t.Fatal("empty session ID accepted")
	}
}

func TestMetrics(t *testing.T) {
	ts, database := newTestServer(t)
	ctx := context.Background()
	for _, id := range []string{"busy", "quiet"} {
		if err := database.PutFolder(ctx, db.Folder{ID: id, Path: "/data/" + id, Type: db.SendReceive}); err != nil {
			t.Fatal(err)
		}
	}
	req, _ := http.NewRequest("GET", ts.URL+"/metrics", nil)
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	for _, want := range []string{
		"lockstep_connected_devices 0",
		"lockstep_folders 2",
		`lockstep_folder_need_bytes{folder="busy"} 1234`,
		`lockstep_folder_need_files{folder="busy"} 2`,
		`lockstep_folder_need_bytes{folder="quiet"} 0`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1025: "1.0 KiB",
		1<<20 - 1: "1024.0 KiB", 1 << 20: "1.0 MiB", 5 << 30: "5.0 GiB",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestPagesEscapeNames renders the pages with a device, a folder label and
// a pending device named as HTML and finds the names only escaped.
func TestPagesEscapeNames(t *testing.T) {
	ts, database := newTestServer(t)
	ctx := context.Background()
	const evil = `<script>alert(1)</script>`
	var peer crypt.DeviceID
	peer[0] = 9
	if err := database.PutDevice(ctx, db.Device{ID: peer.String(), Name: evil, Addresses: []string{"dynamic"}}); err != nil {
		t.Fatal(err)
	}
	if err := database.PutFolder(ctx, db.Folder{ID: "docs", Label: evil, Path: "/data/docs", Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	c := setUp(t, ts.URL)
	for _, p := range []string{"/", "/devices", "/folders", "/folders/docs", "/fragments/devices", "/fragments/folders"} {
		resp, err := c.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", p, resp.Status)
		}
		if strings.Contains(string(body), "<script>alert") {
			t.Errorf("GET %s: the name is not escaped", p)
		}
		if p != "/folders/docs" && !strings.Contains(string(body), "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("GET %s: the escaped name is missing", p)
		}
	}
}
