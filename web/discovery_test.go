package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// reportDiscovery stands in for the node's discovery parts, which run only
// in a whole node (their end-to-end tests are in test/netns_test.go).
type reportDiscovery struct{ st DiscoveryStatus }

func (r reportDiscovery) Report() DiscoveryStatus { return r.st }

// TestDiscoveryNearby: nearby lists only devices neither added nor this
// one, in the REST API and on the devices page, where hostile text from
// the network shows as text.
func TestDiscoveryNearby(t *testing.T) {
	database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close() })
	var self crypt.DeviceID
	self[0] = 7 // newTestServer's ID
	known, stranger := deviceID(8), deviceID(9)
	if err := database.PutDevice(context.Background(), db.Device{ID: known.String(), Name: "known", Addresses: []string{"dynamic"}}); err != nil {
		t.Fatal(err)
	}
	seen := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	disc := reportDiscovery{DiscoveryStatus{
		LocalDiscovery: true,
		Nearby: []NearbyDevice{
			{ID: known.String(), Addresses: []string{"tcp://10.0.0.8:22100"}, LastSeen: seen},
			{ID: stranger.String(), Addresses: []string{"tcp://10.0.0.9:22100"}, LastSeen: seen},
			{ID: self.String(), Addresses: []string{"tcp://10.0.0.7:22100"}, LastSeen: seen},
		},
		Servers: []DiscoveryServer{{URL: "https://10.0.0.1:8443/?id=X", Error: "<img src=x onerror=alert(1)>"}},
		Relays:  []RelayStatus{{URL: "relay://10.0.0.1:22067/?id=X", Registered: true}},
	}}
	s, err := New(context.Background(), "127.0.0.1:0", Config{ID: self, DB: database, Conns: fakeConns{}, Engine: fakeEngine{}, Discovery: disc, APIKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := serveTest(t, s)

	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/rest/discovery", nil)
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st DiscoveryStatus
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nearby) != 1 || st.Nearby[0].ID != stranger.String() {
		t.Fatalf("nearby = %+v, want only the stranger", st.Nearby)
	}
	if len(st.Servers) != 1 || len(st.Relays) != 1 || !st.Relays[0].Registered {
		t.Fatalf("servers %+v relays %+v", st.Servers, st.Relays)
	}

	c := setUp(t, ts.URL)
	resp, err = c.Get(ts.URL + "/devices")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if !strings.Contains(page, `data-nearby-device="`+stranger.String()+`"`) {
		t.Error("the devices page does not offer the nearby stranger")
	}
	if strings.Contains(page, `data-nearby-device="`+known.String()+`"`) || strings.Contains(page, `data-nearby-device="`+self.String()+`"`) {
		t.Error("the devices page offers a known device or this one as nearby")
	}
	if strings.Contains(page, "<img src=x") || !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Error("an error from a discovery server is not escaped")
	}
}
