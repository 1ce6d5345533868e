package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"
)

// Console authentication: one admin password (a bcrypt hash in the db
// settings), sessions held in memory, CSRF tokens and a login rate limit.

const (
	// passwordSetting is the db settings key of the admin password hash.
	passwordSetting = "gui.password"
	sessionCookie   = "lockstep-session"
	// sessionCookie and preCookie are suffixed with the device's short ID.
	// preCookie carries the double-submit CSRF token of the login and setup
	// forms, which are posted before there is a session.
	preCookie = "lockstep-csrf"
	// sessionTTL is how long a session lives after its last use.
	sessionTTL = 12 * time.Hour
	// loginWindow and loginFailures: a client with loginFailures wrong
	// passwords within loginWindow is refused until the oldest ages out.
	loginWindow   = time.Minute
	loginFailures = 5
	// Password length bounds; bcrypt reads at most 72 bytes.
	minPassword = 8
	maxPassword = 72
)

// Errors of the console's authentication.
var (
	ErrPasswordSet     = errors.New("the admin password is set already")
	ErrPasswordLength  = errors.New("the password must be 8 to 72 bytes long")
	ErrPasswordMatch   = errors.New("the passwords do not match")
	ErrWrongPassword   = errors.New("wrong password")
	ErrTooManyAttempts = errors.New("too many wrong passwords; wait a minute")
)

// session is one logged-in browser.
type session struct {
	csrf    string
	expires time.Time
	// flash is a message shown once on the next page.
	flash string
}

// sessions holds the console's sessions and login failures. Safe for
// concurrent use; expired entries are dropped as they are met.
type sessions struct {
	mu       sync.Mutex
	byID     map[string]*session
	failures map[string][]time.Time // client host -> recent wrong passwords
	now      func() time.Time
}

func newSessions() *sessions {
	return &sessions{byID: map[string]*session{}, failures: map[string][]time.Time{}, now: time.Now}
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session and returns its ID.
func (ss *sessions) create() string {
	id := randomToken()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.byID[id] = &session{csrf: randomToken(), expires: ss.now().Add(sessionTTL)}
	return id
}

// get returns a copy of the live session id and extends it; ok is false
// for an unknown or expired one.
func (ss *sessions) get(id string) (session, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for k, s := range ss.byID {
		if now.After(s.expires) {
			delete(ss.byID, k)
		}
	}
	s, ok := ss.byID[id]
	if !ok {
		return session{}, false
	}
	s.expires = now.Add(sessionTTL)
	return *s, true
}

// setFlash stores a message for the session's next page.
func (ss *sessions) setFlash(id, msg string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.byID[id]; ok {
		s.flash = msg
	}
}

// takeFlash returns and clears the session's message.
func (ss *sessions) takeFlash(id string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[id]
	if !ok {
		return ""
	}
	msg := s.flash
	s.flash = ""
	return msg
}

// removeAll ends every session: the password changed.
func (ss *sessions) removeAll() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	clear(ss.byID)
}

func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, id)
}

// allowLogin reports whether client may try a password now.
func (ss *sessions) allowLogin(client string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.recentFailures(client)) < loginFailures
}

// failLogin records a wrong password from client.
func (ss *sessions) failLogin(client string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.failures[client] = append(ss.recentFailures(client), ss.now())
}

// recentFailures drops client's failures older than loginWindow and
// returns the rest. ss.mu is held.
func (ss *sessions) recentFailures(client string) []time.Time {
	cutoff := ss.now().Add(-loginWindow)
	fs := ss.failures[client]
	i := 0
	for i < len(fs) && !fs[i].After(cutoff) {
		i++
	}
	fs = fs[i:]
	if len(fs) == 0 {
		delete(ss.failures, client)
		return nil
	}
	ss.failures[client] = fs
	return fs
}

// clientHost is the rate-limited identity of a request: its remote IP.
func clientHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// hashPassword checks the password's length and returns its bcrypt hash.
func hashPassword(pw string) (string, error) {
	if len(pw) < minPassword || len(pw) > maxPassword {
		return "", ErrPasswordLength
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	if err != nil {
		return "", err
	}
	return string(h), nil
}

// checkPassword reports whether pw matches hash.
func checkPassword(hash, pw string) bool {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)) == nil
}

// tokensEqual compares two CSRF tokens in constant time; empty never
// matches.
func tokensEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// sendTo sends the browser to page (the login or setup page) when its
// session is gone. A page's own script (htmx, console.js) asks with an
// HX-Request header: it gets 401 and HX-Redirect, which htmx follows with
// the whole window. A redirect would be followed inside the request, and
// the login page pasted into the panel that asked.
func sendTo(c echo.Context, page string) error {
	if c.Request().Header.Get("HX-Request") != "" {
		c.Response().Header().Set("HX-Redirect", page)
		return c.String(http.StatusUnauthorized, "log in again")
	}
	return c.Redirect(http.StatusSeeOther, page)
}
