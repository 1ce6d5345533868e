package web

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// newHTTPSServer runs a Server bound to every address (the tests only
// dial 127.0.0.1) with the admin password set unless noPassword.
func newHTTPSServer(t *testing.T, home string, noPassword bool) (*Server, error) {
	t.Helper()
	database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close() })
	ctx := context.Background()
	if !noPassword {
		h, err := hashPassword(testPassword)
		if err != nil {
			t.Fatal(err)
		}
		if err := database.SetSetting(ctx, passwordSetting, h); err != nil {
			t.Fatal(err)
		}
	}
	var id crypt.DeviceID
	id[0] = 9
	s, err := New(ctx, "0.0.0.0:0", Config{ID: id, DB: database, Conns: fakeConns{}, Engine: fakeEngine{}, APIKey: testKey, Home: home, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Serve(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, nil
}

func TestNonLoopbackNeedsPassword(t *testing.T) {
	_, err := newHTTPSServer(t, t.TempDir(), true)
	if !errors.Is(err, ErrNeedsPassword) {
		t.Fatalf("New on 0.0.0.0 without a password: %v, want ErrNeedsPassword", err)
	}
	if _, err := newHTTPSServer(t, "", false); !errors.Is(err, ErrNoHome) {
		t.Fatalf("New on 0.0.0.0 without a home: %v, want ErrNoHome", err)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:0": true, "127.0.0.2:8385": true, "[::1]:1": true, "localhost:1": true,
		"0.0.0.0:0": false, ":8385": false, "[::]:1": false, "192.0.2.1:1": false, "example.org:1": false,
	} {
		got, err := isLoopback(addr)
		if err != nil || got != want {
			t.Errorf("isLoopback(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	if _, err := isLoopback("no-port"); err == nil {
		t.Error("isLoopback without a port: no error")
	}
}

// TestHTTPSConsole: beyond loopback the console serves HTTPS with the
// home's certificate, kept across restarts; the pinned client trusts it
// and nothing else.
func TestHTTPSConsole(t *testing.T) {
	home := t.TempDir()
	s, err := newHTTPSServer(t, home, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %q, want https://127.0.0.1:PORT", s.URL())
	}
	for _, f := range []string{CertFile, KeyFile} {
		st, err := os.Stat(filepath.Join(home, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	cert, err := readCert(home)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("certificate key %T, want ECDSA P-256", cert.PublicKey)
	}
	if life := cert.NotAfter.Sub(cert.NotBefore); life < certValidity || life > certValidity+2*time.Hour {
		t.Errorf("certificate valid for %v, want about 10 years", life)
	}
	if err := cert.VerifyHostname("localhost"); err != nil {
		t.Error(err)
	}
	if err := cert.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	fp, err := CertFingerprint(home)
	if err != nil || len(fp) != 32*3-1 {
		t.Fatalf("fingerprint %q, %v", fp, err)
	}

	cl, err := NewClient(home, s.URL(), testKey)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := cl.Do(context.Background(), "GET", "/rest/status", nil, &st); err != nil {
		t.Fatalf("pinned client: %v", err)
	}
	if st.DeviceID != s.cfg.ID.String() {
		t.Errorf("status of %q", st.DeviceID)
	}
	// A client pinned to another home's certificate refuses the server.
	other := t.TempDir()
	if _, err := newHTTPSServer(t, other, false); err != nil {
		t.Fatal(err)
	}
	bad, err := NewClient(other, s.URL(), testKey)
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Do(context.Background(), "GET", "/rest/status", nil, nil)
	var uerr x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &uerr) && !errors.Is(err, ErrCertMismatch) {
		t.Fatalf("client pinned to another certificate: %v, want refused", err)
	}
	// A plain client (system roots) refuses the self-signed certificate.
	plain := &Client{BaseURL: s.URL(), APIKey: testKey}
	if err := plain.Do(context.Background(), "GET", "/rest/status", nil, nil); err == nil {
		t.Fatal("an unpinned client accepted the self-signed certificate")
	}
	// A restart keeps the certificate.
	if _, err := newHTTPSServer(t, home, false); err != nil {
		t.Fatal(err)
	}
	if again, _ := CertFingerprint(home); again != fp {
		t.Errorf("fingerprint changed across restarts: %s then %s", fp, again)
	}
}

func TestNewCertNames(t *testing.T) {
	bound := net.ParseIP("192.0.2.7")
	certPEM, _, err := newCert(bound, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, CertFile), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := readCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"192.0.2.7", "localhost", "::1"} {
		if err := cert.VerifyHostname(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		if err := cert.VerifyHostname(h); err != nil {
			t.Errorf("host name %s: %v", h, err)
		}
	}
	if err := cert.VerifyHostname("192.0.2.8"); err == nil {
		t.Error("the certificate names an address it was not made for")
	}
}

func TestFingerprintFormat(t *testing.T) {
	// SHA-256 of the empty input.
	want := "E3:B0:C4:42:98:FC:1C:14:9A:FB:F4:C8:99:6F:B9:24:27:AE:41:E4:64:9B:93:4C:A4:95:99:1B:78:52:B8:55"
	if got := Fingerprint(nil); got != want {
		t.Errorf("Fingerprint(nil) = %s", got)
	}
}

// TestServeStopsWithOpenConnection: a connection that never sends a
// request (browsers open them ahead) does not make stopping the console
// fail; it is closed after the grace.
func TestServeStopsWithOpenConnection(t *testing.T) {
	database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, "127.0.0.1:0", Config{ID: crypt.DeviceID{7}, DB: database, Conns: fakeConns{}, Engine: fakeEngine{}, APIKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.grace = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // accepted, nothing sent
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}
