package test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// pendingCap is the most pending devices a node keeps (storage/db's
// MaxPendingDevices, as docs/contract.md states it).
const pendingCap = 100

// newKey makes a device key and certificate in memory, as an attacker
// makes them by the thousand.
func newKey() (*crypt.Identity, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &crypt.Identity{
		Certificate: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf},
		Leaf:        leaf,
		ID:          crypt.DeviceIDFromCert(leaf),
	}, nil
}

// tryConnect connects to the node at hostport (whose ID is server) as id,
// from the loopback address src, and waits for its verdict: an error when
// it refuses id.
func tryConnect(id *crypt.Identity, src net.IP, hostport string, server crypt.DeviceID) error {
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
	_, err = tc.Read(make([]byte, 1)) // TLS 1.3: the refusal comes here
	return err
}

// pendingIDs lists the node's pending devices.
func pendingIDs(n *node) []string {
	var p struct {
		Devices []struct {
			ID string `json:"id"`
		} `json:"devices"`
	}
	n.get("/rest/pending", &p)
	out := make([]string, len(p.Devices))
	for i, d := range p.Devices {
		out[i] = d.ID
	}
	return out
}

// TestPendingCapFromManyAddresses: for 12 s, fresh keys from 250 loopback
// addresses try to connect to a running node, as fast as 16 workers can.
// The node keeps at most pendingCap of them pending, logs a line a minute
// about them rather than one per attempt, answers its API meanwhile, and a
// device that comes afterwards is listed (the newest are kept).
func TestPendingCapFromManyAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "victim")
	hostport := strings.TrimPrefix(n.Listen, "tcp://")
	server, err := crypt.ParseDeviceID(n.ID)
	if err != nil {
		t.Fatal(err)
	}

	const (
		flood   = 12 * time.Second
		sources = 250
		workers = 16
	)
	var (
		attempts, accepted, failed atomic.Int64
		wg                         sync.WaitGroup
	)
	end := time.Now().Add(flood)
	for w := range workers {
		wg.Go(func() {
			for i := w; time.Now().Before(end); i += workers {
				id, err := newKey()
				if err != nil {
					failed.Add(1)
					continue
				}
				src := net.IPv4(127, 5, 0, byte(1+i%sources))
				if tryConnect(id, src, hostport, server) == nil {
					accepted.Add(1)
				}
				attempts.Add(1)
			}
		})
	}
	// The API answers while the flood runs.
	slowest := time.Duration(0)
	for time.Now().Before(end) {
		start := time.Now()
		if st := n.status(); st.DeviceID != n.ID {
			t.Fatalf("status during the flood: %+v", st)
		}
		slowest = max(slowest, time.Since(start))
		time.Sleep(500 * time.Millisecond)
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d keys could not be made", f)
	}
	if a := accepted.Load(); a > 0 {
		t.Fatalf("%d unknown devices were let in", a)
	}
	if slowest > 2*time.Second {
		t.Errorf("status took up to %v during the flood", slowest)
	}
	ids := pendingIDs(n)
	lines := 0
	for line := range strings.SplitSeq(n.log.String(), "\n") {
		if strings.Contains(line, "unknown device tried to connect") {
			lines++
		}
	}
	t.Logf("%d attempts in %v: %d pending, %d log lines, status answered in %v at most", attempts.Load(), flood, len(ids), lines, slowest.Round(time.Millisecond))
	if len(ids) > pendingCap {
		t.Errorf("%d pending devices, want at most %d", len(ids), pendingCap)
	}
	if lines > 2 {
		t.Errorf("%d log lines about unknown devices in %v", lines, flood)
	}

	// A device that comes afterwards, trying again as devices do, is
	// listed, and the list stays within its cap.
	late, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the device after the flood to be listed", func() bool {
		tryConnect(late, net.IPv4(127, 6, 0, 1), hostport, server)
		ids := pendingIDs(n)
		for _, id := range ids {
			if id == late.ID.String() {
				return len(ids) <= pendingCap
			}
		}
		return false
	})
}
