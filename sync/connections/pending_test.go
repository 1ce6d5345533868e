package connections

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/discover"
	"lockstep/test/testutil"
)

// dbRegistry is the node's registry over its real database, as
// cmd/lockstep wires it; it counts the pending devices it records.
type dbRegistry struct {
	db       *db.DB
	recorded atomic.Int64
}

func (r *dbRegistry) Peers(ctx context.Context) ([]Peer, error) {
	devs, err := r.db.Devices(ctx)
	if err != nil {
		return nil, err
	}
	var out []Peer
	for _, d := range devs {
		id, err := crypt.ParseDeviceID(d.ID)
		if err != nil {
			continue
		}
		out = append(out, Peer{ID: id, Addresses: d.Addresses})
	}
	return out, nil
}

func (r *dbRegistry) Pending(ctx context.Context, id crypt.DeviceID, _, addr string) error {
	r.recorded.Add(1)
	now := time.Now()
	return r.db.AddPendingDevice(ctx, db.PendingDevice{ID: id.String(), Address: addr, FirstSeen: now, LastSeen: now})
}

func (r *dbRegistry) Seen(ctx context.Context, id crypt.DeviceID, t time.Time) error {
	if err := r.db.TouchDevice(ctx, id.String(), t); err != nil && !errors.Is(err, db.ErrNotFound) {
		return err
	}
	return nil
}

// freshIdentity makes a device key and certificate in memory: what an
// attacker makes by the thousand.
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

// knock connects to hostport from the loopback address src as id, runs
// the TLS handshake and waits for the server's verdict.
func knock(id *crypt.Identity, src net.IP, hostport string, server crypt.DeviceID) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 10 * time.Second}
	raw, err := d.Dial("tcp", hostport)
	if err != nil {
		return err
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(raw, crypt.ClientTLSConfig(id, server))
	if err := tc.Handshake(); err != nil {
		return err
	}
	// In TLS 1.3 the server's refusal arrives at the first read.
	_, err = tc.Read(make([]byte, 1))
	return err
}

// TestPendingFlood: 2,000 handshakes from fresh identities, from 200
// addresses, make the node record a bounded number of pending devices
// (at most db.MaxPendingDevices kept) and log a few lines, not one per
// attempt; a trusted peer connects meanwhile, and an unknown device that
// comes after the flood is recorded.
func TestPendingFlood(t *testing.T) {
	defer goleak.VerifyNone(t)
	if testing.Short() {
		t.Skip("2,000 TLS handshakes")
	}
	database, err := db.Open(filepath.Join(t.TempDir(), "lockstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer database.Close()
	ctx := context.Background()
	a, b := identity(t, "a"), identity(t, "b")
	if err := database.PutDevice(ctx, db.Device{ID: b.ID.String(), Addresses: []string{"dynamic"}}); err != nil {
		t.Fatal(err)
	}
	// The list is full already, of devices that tried yesterday: the
	// flood's attempts that are recorded take their places.
	yesterday := time.Now().Add(-24 * time.Hour)
	for i := range db.MaxPendingDevices {
		id := freshIdentity(t).ID.String()
		if err := database.AddPendingDevice(ctx, db.PendingDevice{ID: id, FirstSeen: yesterday, LastSeen: yesterday.Add(time.Duration(i))}); err != nil {
			t.Fatal(err)
		}
	}
	reg := &dbRegistry{db: database}
	logs := &testutil.LogRecorder{}
	sa, err := New(ctx, Config{
		Identity: a, Registry: reg, Handler: holdHandler{}, Logger: slog.New(logs),
		Listen: []string{"tcp://127.0.0.1:0"}, RefreshInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	hostport, _ := ParseAddress(sa.Addresses()[0])
	stopA := serveAll(sa)
	defer stopA()

	const (
		attempts = 2000
		sources  = 200
		workers  = 16
	)
	idents := make([]*crypt.Identity, attempts)
	for i := range idents {
		idents[i] = freshIdentity(t)
	}
	start := time.Now()
	var (
		next   atomic.Int64
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= attempts {
					return
				}
				src := net.IPv4(127, 1, byte(i%sources/250), byte(1+i%sources%250))
				if knock(idents[i], src, hostport, a.ID) == nil {
					failed.Add(1) // the server must never accept
				}
			}
		})
	}

	// A trusted peer connects while the flood runs.
	for next.Load() < attempts/4 {
		time.Sleep(10 * time.Millisecond)
	}
	rb := &memRegistry{peers: []Peer{{ID: a.ID, Addresses: sa.Addresses()}}}
	sb := newService(t, b, rb)
	peerStart := time.Now()
	stopB := serveAll(sb)
	defer stopB()
	testutil.Eventually(t, waitTimeout, "the trusted peer to connect during the flood", func() bool { return sa.Connected(b.ID) })
	t.Logf("trusted peer connected in %v, with %d of %d attempts made", time.Since(peerStart).Round(time.Millisecond), next.Load(), attempts)

	wg.Wait()
	took := time.Since(start)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d unknown devices got a connection", n)
	}
	recorded := reg.recorded.Load()
	ps, err := database.PendingDevices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lines := logs.Count(slog.LevelInfo, "unknown device tried to connect; recorded as pending")
	t.Logf("%d attempts in %v: %d recorded, %d kept, %d log lines", attempts, took.Round(time.Millisecond), recorded, len(ps), lines)
	if len(ps) != db.MaxPendingDevices {
		t.Errorf("%d pending devices kept, want %d", len(ps), db.MaxPendingDevices)
	}
	// The newest are kept: every attempt recorded, and of yesterday's the
	// rest.
	old := 0
	for _, p := range ps {
		if p.LastSeen.Before(start) {
			old++
		}
	}
	if want := max(0, db.MaxPendingDevices-int(recorded)); old != want {
		t.Errorf("%d of yesterday's pending devices kept after %d attempts were recorded, want %d", old, recorded, want)
	}
	// Recording is rate limited: at most the burst and the rate over the
	// time the flood took.
	if limit := int64(allPendingBurst) + int64(took/allPendingEvery) + 1; recorded > limit {
		t.Errorf("%d attempts recorded in %v, limit %d", recorded, took.Round(time.Millisecond), limit)
	}
	if limit := 1 + int(took/logEvery) + 1; lines > limit {
		t.Errorf("%d log lines about unknown devices in %v, limit %d", lines, took.Round(time.Millisecond), limit)
	}
	if !sa.Connected(b.ID) {
		t.Error("the trusted peer lost its connection")
	}

	// A device that comes after the flood, from an address of its own, is
	// recorded as it tries again (as devices do), and kept as the newest.
	late := freshIdentity(t)
	testutil.Eventually(t, waitTimeout, "the device after the flood to be recorded", func() bool {
		knock(late, net.IPv4(127, 2, 0, 1), hostport, a.ID)
		ps, err := database.PendingDevices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.ID == late.ID.String() {
				return len(ps) == db.MaxPendingDevices
			}
		}
		return false
	})
}

// TestHandshakesPerSource: one address cannot hold more than
// maxHandshakesPerSource handshakes open; further connections from it are
// closed at once, while another address is served.
func TestHandshakesPerSource(t *testing.T) {
	defer goleak.VerifyNone(t)
	a := identity(t, "a")
	sa := newService(t, a, &memRegistry{})
	hostport, _ := ParseAddress(sa.Addresses()[0])
	defer serveAll(sa)()

	// Silent connections: each holds a handshake open until it times out.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	src := net.IPv4(127, 3, 0, 1)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}
	for range maxHandshakesPerSource {
		c, err := d.Dial("tcp", hostport)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// The service sees them all before the next one comes.
	testutil.Eventually(t, waitTimeout, "the silent handshakes to be under way", func() bool {
		return sa.limits.handshaking(discover.SourceOf(&net.TCPAddr{IP: src})) == maxHandshakesPerSource
	})
	extra, err := d.Dial("tcp", hostport)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := extra.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a handshake beyond the limit was not closed: %v", err)
	}
	// Another address is served as usual.
	if err := knock(freshIdentity(t), net.IPv4(127, 3, 0, 2), hostport, a.ID); err == nil {
		t.Fatal("an unknown device was accepted")
	} else if isTimeout(err) {
		t.Fatalf("another address was not served: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestPendingAllowance: per source, pendingBurst attempts are recorded at
// once and one more per pendingEvery; over all sources allPendingBurst and
// one more per allPendingEvery; forgetting sources never lifts the overall
// limit.
func TestPendingAllowance(t *testing.T) {
	l := newLimits()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src := func(i int) netip.Prefix {
		return discover.SourceOf(&net.TCPAddr{IP: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i))})
	}
	for i := range pendingBurst {
		if !l.recordPending(src(0), t0) {
			t.Fatalf("attempt %d of a source refused", i+1)
		}
	}
	if l.recordPending(src(0), t0) {
		t.Fatalf("attempt %d of a source at once recorded", pendingBurst+1)
	}
	if l.recordPending(src(0), t0.Add(pendingEvery-time.Millisecond)) {
		t.Fatal("recorded before the source's allowance grew")
	}
	if !l.recordPending(src(0), t0.Add(pendingEvery)) {
		t.Fatal("refused once the source's allowance grew")
	}
	// The overall allowance, whole again by then, gave one: the rest of it
	// goes to other sources, then nothing until it grows.
	for i := range allPendingBurst - 1 {
		if !l.recordPending(src(i+1), t0.Add(pendingEvery)) {
			t.Fatalf("attempt %d overall refused", i+2)
		}
	}
	at := t0.Add(pendingEvery)
	if l.recordPending(src(1000), at) {
		t.Fatalf("attempt %d overall recorded at once", allPendingBurst+1)
	}
	if !l.recordPending(src(1000), at.Add(allPendingEvery)) {
		t.Fatal("refused once the overall allowance grew")
	}
	// Many sources: the table stays bounded, and the overall limit holds.
	recorded := 0
	for i := range 3 * maxSources {
		if l.recordPending(src(2000+i), at.Add(allPendingEvery)) {
			recorded++
		}
	}
	if recorded != 0 || len(l.sources) > maxSources {
		t.Fatalf("%d sources at once: %d recorded, %d remembered", 3*maxSources, recorded, len(l.sources))
	}
}

// TestLogLines: one line per logEvery, which counts what it skipped.
func TestLogLines(t *testing.T) {
	l := newLimits()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if ok, _, _ := l.logUnknown(t0, true); !ok {
		t.Fatal("the first attempt is not logged")
	}
	l.logUnknown(t0.Add(time.Second), true)
	l.logUnknown(t0.Add(2*time.Second), false)
	if ok, _, _ := l.logUnknown(t0.Add(logEvery-time.Nanosecond), true); ok {
		t.Fatal("logged again within logEvery")
	}
	if ok, _, _ := l.logUnknown(t0.Add(logEvery), false); ok {
		t.Fatal("an attempt not recorded was logged as recorded")
	}
	ok, skipped, unrecorded := l.logUnknown(t0.Add(logEvery), true)
	if !ok || skipped != 4 || unrecorded != 2 {
		t.Fatalf("after logEvery: log %v, %d skipped (want 4), %d unrecorded (want 2)", ok, skipped, unrecorded)
	}
}
