package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupNeedsToken: before the admin password is set, /setup takes it
// only with the one-time setup token the server wrote to the home (mode
// 0600), or the API key; the token is gone once the password is set.
func TestSetupNeedsToken(t *testing.T) {
	home := t.TempDir()
	s := serveOn(t, "127.0.0.1:0", Config{Home: home})
	base := s.URL()
	path := filepath.Join(home, "setup-token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no setup token in the home: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("setup token mode %v, want 0600", fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 32 {
		t.Fatalf("setup token %q is too short", token)
	}

	c := browser(t)
	for _, tok := range []string{"", "wrong", token + "x"} {
		csrf := formToken(t, c, base, "/setup")
		resp := post(t, c, base+"/setup", url.Values{"csrf": {csrf}, "token": {tok}, "password": {testPassword}, "confirm": {testPassword}})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("setup with token %q: %s, want 403", tok, resp.Status)
		}
	}
	if _, err := s.cfg.DB.Setting(context.Background(), passwordSetting); err == nil {
		t.Fatal("the password was set without the token")
	}
	csrf := formToken(t, c, base, "/setup")
	resp := post(t, c, base+"/setup", url.Values{"csrf": {csrf}, "token": {token}, "password": {testPassword}, "confirm": {testPassword}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("setup with the token: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the setup token is still in the home after setup: %v", err)
	}

	// The API key does as well as the token.
	s2 := serveOn(t, "127.0.0.1:0", Config{})
	c2 := browser(t)
	csrf = formToken(t, c2, s2.URL(), "/setup")
	resp = post(t, c2, s2.URL()+"/setup", url.Values{"csrf": {csrf}, "token": {testKey}, "password": {testPassword}, "confirm": {testPassword}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("setup with the API key: %s", resp.Status)
	}
}

// TestConsolePasswordREST: PUT /rest/console/password sets the password
// with the API key at first run and later; a console session changes it
// only with the current one; every session ends with a change.
func TestConsolePasswordREST(t *testing.T) {
	ts, database := newTestServer(t)
	u := ts.URL + "/rest/console/password"
	if code := apiCall(t, "PUT", u, ConsolePassword{Password: "short"}); code != http.StatusBadRequest {
		t.Errorf("a short password: %d, want 400", code)
	}
	if code := apiCall(t, "PUT", u, ConsolePassword{Password: testPassword}); code != http.StatusNoContent {
		t.Fatalf("first run with the API key: %d, want 204", code)
	}
	hash, err := database.Setting(context.Background(), passwordSetting)
	if err != nil || !checkPassword(hash, testPassword) {
		t.Fatalf("the password was not set: %v", err)
	}

	c := browser(t)
	csrf := formToken(t, c, ts.URL, "/login")
	if resp := post(t, c, ts.URL+"/login", map[string][]string{"csrf": {csrf}, "password": {testPassword}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", resp.Status)
	}
	csrf = formToken(t, c, ts.URL, "/devices")
	put := func(body ConsolePassword) int {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("PUT", u, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put(ConsolePassword{Password: "a new password"}); code != http.StatusForbidden {
		t.Errorf("a session without the current password: %d, want 403", code)
	}
	if code := put(ConsolePassword{Password: "a new password", Current: "wrong one"}); code != http.StatusForbidden {
		t.Errorf("a session with a wrong current password: %d, want 403", code)
	}
	if code := put(ConsolePassword{Password: "a new password", Current: testPassword}); code != http.StatusNoContent {
		t.Fatalf("a session with the current password: %d, want 204", code)
	}
	resp, err := c.Get(ts.URL + "/devices")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("the session after the change: %s to %q, want the login page", resp.Status, resp.Header.Get("Location"))
	}
	hash, _ = database.Setting(context.Background(), passwordSetting)
	if !checkPassword(hash, "a new password") {
		t.Error("the password did not change")
	}
}
