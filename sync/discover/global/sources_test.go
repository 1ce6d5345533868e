package global

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// freshIdentity makes a device key and certificate in memory: what anyone
// can make by the thousand.
func freshIdentity(t testing.TB) *crypt.Identity {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &crypt.Identity{
		Certificate: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf},
		Leaf:        leaf,
		ID:          crypt.DeviceIDFromCert(leaf),
	}
}

// from makes r's requests come from the loopback address src.
func (r *rawClient) from(src string) *rawClient {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	tr := r.hc.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return r
}

// announceFrom announces a tcp address for a new device from src and
// returns the device and the status.
func announceFrom(t *testing.T, s *Server, src string) (*crypt.Identity, int) {
	t.Helper()
	id := freshIdentity(t)
	code, _, _ := newRawClient(t, s, id).from(src).do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:1"))
	return id, code
}

// TestOneSourceCannotFill: one address announcing fresh device after
// fresh device gets DefaultMaxPerSource of them stored, the rest refused
// with 429, and the service still takes devices from elsewhere.
func TestOneSourceCannotFill(t *testing.T) {
	s := startServer(t, ServerConfig{MaxDevices: 2 * DefaultMaxPerSource})
	stored, refused := 0, 0
	for range 2*DefaultMaxPerSource + 1 {
		switch _, code := announceFrom(t, s, "127.0.0.1"); code {
		case http.StatusNoContent:
			stored++
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("announcement answered %d", code)
		}
	}
	if stored != DefaultMaxPerSource || s.Stats().Devices != DefaultMaxPerSource {
		t.Fatalf("%d stored of one source's devices (%d held), want %d", stored, s.Stats().Devices, DefaultMaxPerSource)
	}
	id, code := announceFrom(t, s, "127.0.0.2")
	if code != http.StatusNoContent {
		t.Fatalf("a device of another source: %d, want 204", code)
	}
	if code, _ := newRawClient(t, s, id).lookup(id.ID); code != http.StatusOK {
		t.Fatalf("looking up the other source's device: %d", code)
	}
}

// TestDevicesPerSource: at the limit a source's new device is refused,
// while its devices may announce again, and one that leaves (or expires)
// makes room.
func TestDevicesPerSource(t *testing.T) {
	clk := testutil.NewClock()
	const per = 3
	s := startServer(t, ServerConfig{MaxPerSource: per, TTL: time.Hour, Now: clk.Now})
	var ids []*crypt.Identity
	for i := range per {
		id, code := announceFrom(t, s, "127.0.0.1")
		if code != http.StatusNoContent {
			t.Fatalf("device %d of %d: %d", i+1, per, code)
		}
		ids = append(ids, id)
		clk.Add(time.Minute)
	}
	if _, code := announceFrom(t, s, "127.0.0.1"); code != http.StatusTooManyRequests {
		t.Fatalf("device %d of one source: %d, want 429", per+1, code)
	}
	// Known devices announce again.
	again := newRawClient(t, s, ids[0]).from("127.0.0.1")
	if code, body, _ := again.do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:2")); code != http.StatusNoContent {
		t.Fatalf("announcing again at the limit: %d %s", code, body)
	}
	// One that forgets itself makes room.
	if code, body, _ := again.do(http.MethodPost, "", []byte(`{"addresses": []}`)); code != http.StatusNoContent {
		t.Fatalf("forgetting: %d %s", code, body)
	}
	if _, code := announceFrom(t, s, "127.0.0.1"); code != http.StatusNoContent {
		t.Fatalf("a new device after one left: %d, want 204", code)
	}
	// So does one that expires (the second, announced a minute after the
	// first, which announced again meanwhile).
	clk.Add(time.Hour - 2*time.Minute)
	if _, code := announceFrom(t, s, "127.0.0.1"); code != http.StatusNoContent {
		t.Fatalf("a new device after one expired: %d, want 204", code)
	}
	// A device that moves to a source at its limit is refused there, and
	// keeps its entry.
	other, code := announceFrom(t, s, "127.0.0.2")
	if code != http.StatusNoContent {
		t.Fatalf("a device of another source: %d", code)
	}
	moved := newRawClient(t, s, other).from("127.0.0.1")
	if code, body, _ := moved.do(http.MethodPost, "", announceBody(t, "tcp://0.0.0.0:3")); code != http.StatusTooManyRequests {
		t.Fatalf("moving to a source at its limit: %d %s, want 429", code, body)
	}
	if code, body := moved.lookup(other.ID); code != http.StatusOK || lookupAddrs(t, body)[0] != "tcp://127.0.0.2:1" {
		t.Fatalf("after a refused move: %d %s, want its first entry", code, body)
	}
}

// TestFullTableEvictsHeaviestSource: when the table is full, a new device
// takes the place of the oldest device of the source holding the most, as
// long as that source holds more than the newcomer's would; otherwise it
// is refused with 503.
func TestFullTableEvictsHeaviestSource(t *testing.T) {
	clk := testutil.NewClock()
	s := startServer(t, ServerConfig{MaxDevices: 6, MaxPerSource: 4, TTL: time.Hour, Now: clk.Now})
	var heavy []*crypt.Identity
	for range 4 {
		id, code := announceFrom(t, s, "127.0.0.1")
		if code != http.StatusNoContent {
			t.Fatalf("heavy source: %d", code)
		}
		heavy = append(heavy, id)
		clk.Add(time.Second)
	}
	for range 2 {
		if _, code := announceFrom(t, s, "127.0.0.2"); code != http.StatusNoContent {
			t.Fatalf("light source: %d", code)
		}
	}
	look := newRawClient(t, s, heavy[0])
	// 4, 2, 0 → 3, 2, 1 → 2, 2, 2: two newcomers take the heavy source's
	// oldest places, the third is refused.
	for i := range 2 {
		if _, code := announceFrom(t, s, "127.0.0.3"); code != http.StatusNoContent {
			t.Fatalf("newcomer %d when full: %d, want 204", i+1, code)
		}
		if code, _ := look.lookup(heavy[i].ID); code != http.StatusNotFound {
			t.Fatalf("the heavy source's device %d is still held: %d", i+1, code)
		}
		if code, _ := look.lookup(heavy[i+1].ID); code != http.StatusOK {
			t.Fatalf("the heavy source's device %d is gone too: %d", i+2, code)
		}
	}
	if _, code := announceFrom(t, s, "127.0.0.3"); code != http.StatusServiceUnavailable {
		t.Fatalf("newcomer when every source holds as many: %d, want 503", code)
	}
	// A new source takes a place of one holding 2 (the one whose oldest
	// device is oldest); its second newcomer is refused.
	if _, code := announceFrom(t, s, "127.0.0.4"); code != http.StatusNoContent {
		t.Fatalf("newcomer of a new source: %d, want 204", code)
	}
	if code, _ := look.lookup(heavy[2].ID); code != http.StatusNotFound {
		t.Fatalf("the oldest device of the heaviest sources is still held: %d", code)
	}
	if _, code := announceFrom(t, s, "127.0.0.4"); code != http.StatusServiceUnavailable {
		t.Fatalf("second newcomer of the new source: %d, want 503", code)
	}
	if got := s.Stats().Devices; got != 6 {
		t.Fatalf("%d devices held, want 6", got)
	}
}
