package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/home"
	"lockstep/test/testutil"
)

// discoveryClient speaks to a discovery service as the device whose home
// is dir, pinning the service's ID from its URL.
func discoveryClient(t *testing.T, dir, service string) (*http.Client, string) {
	t.Helper()
	id, err := crypt.LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(service)
	if err != nil {
		t.Fatal(err)
	}
	server, err := crypt.ParseDeviceID(u.Query().Get("id"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := crypt.ClientTLSConfig(id, server)
	cfg.NextProtos = []string{"http/1.1"}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, "https://" + u.Host + "/"
}

// TestDiscoveryOwnAddressesOnly: through a real node's discovery service,
// a device announcing addresses for another device's ID is refused, and
// the other's entry (announced by that node itself) is unchanged.
func TestDiscoveryOwnAddressesOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	r := startNode(t, "r", "--discovery", "--discovery-listen", "127.0.0.1:0")
	info, err := home.ReadServeInfo(r.home)
	if err != nil || info.Discovery == "" {
		t.Fatalf("serve.json of r: %+v, %v", info, err)
	}
	b := startNode(t, "b", "--discovery-server", info.Discovery)
	mallory := filepath.Join(t.TempDir(), "mallory")
	mustRun(t, mallory, "init")

	hc, base := discoveryClient(t, mallory, info.Discovery)
	lookup := func() []string {
		t.Helper()
		resp, err := hc.Get(base + "?device=" + b.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Addresses []string `json:"addresses"`
		}
		if resp.StatusCode == http.StatusNotFound {
			return nil
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return body.Addresses
	}
	testutil.Eventually(t, 30*time.Second, "b to announce itself", func() bool { return slices.Contains(lookup(), b.Listen) })

	forged := fmt.Sprintf(`{"device": %q, "addresses": ["tcp://127.0.0.1:9"]}`, b.ID)
	resp, err := hc.Post(base, "application/json", bytes.NewReader([]byte(forged)))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(msg), "only announce its own") {
		t.Fatalf("announcing for b as another device: %s %s, want 403", resp.Status, msg)
	}
	if got := lookup(); !slices.Equal(got, []string{b.Listen}) {
		t.Fatalf("b's addresses after the forgery: %q, want %q", got, b.Listen)
	}
}
