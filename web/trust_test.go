package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"lockstep/storage/db"
)

// apiDo sends a JSON request with the API key and decodes a 2xx answer
// into out; it returns the status and the error message of a failure.
func apiDo(t *testing.T, method, u string, body, out any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, u, bytes.NewReader(b))
	req.Header.Set("X-API-Key", testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e Error
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, ""
}

func boolPtr(b bool) *bool { return &b }

// TestDeviceTrustREST: POST /rest/devices keeps a known device's trust
// and refuses a contradicting flag; PUT /rest/devices/{id}/trust changes
// it, with "confirm" for a device that was untrusted; a removed receiver
// is not accepted back as trusted.
func TestDeviceTrustREST(t *testing.T) {
	ts, database := newTestServer(t)
	ctx := context.Background()
	recv, peer := deviceID(1).String(), deviceID(2).String()
	devices := ts.URL + "/rest/devices"
	if code, msg := apiDo(t, "POST", devices, AddDevice{ID: recv, Name: "vps", Untrusted: true}, nil); code != http.StatusOK {
		t.Fatalf("adding the receiver: %d %s", code, msg)
	}
	var got DeviceStatus
	if code, msg := apiDo(t, "POST", devices, AddDevice{ID: recv, Addresses: []string{"tcp://127.0.0.1:2"}}, &got); code != http.StatusOK {
		t.Fatalf("re-adding the receiver: %d %s", code, msg)
	}
	if !got.Untrusted || !got.WasUntrusted || got.Name != "vps" || len(got.Addresses) != 1 {
		t.Fatalf("re-adding the receiver answered %+v", got)
	}
	if code, msg := apiDo(t, "POST", devices, AddDevice{ID: recv, Trusted: true}, nil); code != http.StatusConflict || !strings.Contains(msg, "device set") {
		t.Errorf("re-adding the receiver as trusted: %d %q, want 409 pointing at device set", code, msg)
	}
	if code, _ := apiDo(t, "POST", devices, AddDevice{ID: peer, Trusted: true, Untrusted: true}, nil); code != http.StatusBadRequest {
		t.Errorf("both flags: %d, want 400", code)
	}
	if code, msg := apiDo(t, "POST", devices, AddDevice{ID: peer, Name: "laptop"}, nil); code != http.StatusOK {
		t.Fatalf("adding the peer: %d %s", code, msg)
	}
	if code, msg := apiDo(t, "POST", devices, AddDevice{ID: peer, Untrusted: true}, nil); code != http.StatusConflict || !strings.Contains(msg, "device set") {
		t.Errorf("re-adding the peer as untrusted: %d %q", code, msg)
	}

	trust := func(id string) string { return devices + "/" + id + "/trust" }
	if code, _ := apiDo(t, "PUT", trust(recv), map[string]any{}, nil); code != http.StatusBadRequest {
		t.Errorf("no untrusted field: %d, want 400", code)
	}
	if code, _ := apiDo(t, "PUT", trust(deviceID(9).String()), SetTrust{Untrusted: boolPtr(true)}, nil); code != http.StatusNotFound {
		t.Errorf("an unknown device: %d, want 404", code)
	}
	if err := database.PutFolder(ctx, db.Folder{ID: "docs", Path: t.TempDir(), Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	if err := database.ShareFolder(ctx, "docs", recv); err != nil {
		t.Fatal(err)
	}
	code, msg := apiDo(t, "PUT", trust(recv), SetTrust{Untrusted: boolPtr(false)}, nil)
	if code != http.StatusConflict || !strings.Contains(msg, "plaintext") || !strings.Contains(msg, "docs") {
		t.Errorf("trusting the receiver unconfirmed: %d %q, want 409 naming docs", code, msg)
	}
	if d, _ := database.Device(ctx, recv); !d.Untrusted {
		t.Fatal("an unconfirmed change made the receiver trusted")
	}
	var tc TrustChanged
	if code, msg := apiDo(t, "PUT", trust(recv), SetTrust{Untrusted: boolPtr(false), Confirm: true}, &tc); code != http.StatusOK {
		t.Fatalf("trusting the receiver confirmed: %d %s", code, msg)
	}
	if !tc.Changed || tc.Device.Untrusted || tc.Device.TrustChangedAt == nil || len(tc.Folders) != 1 || tc.Folders[0] != "docs" {
		t.Errorf("trusting answered %+v", tc)
	}
	if code, _ := apiDo(t, "PUT", trust(recv), SetTrust{Untrusted: boolPtr(false)}, &tc); code != http.StatusOK || tc.Changed {
		t.Errorf("trusting it again: %d %+v, want an unchanged 200", code, tc)
	}

	// A receiver removed comes back as trusted neither by add nor accept.
	if code, _ := apiDo(t, "PUT", trust(peer), SetTrust{Untrusted: boolPtr(true)}, nil); code != http.StatusOK {
		t.Fatalf("untrusting the peer: %d", code)
	}
	if err := database.RemoveDevice(ctx, peer); err != nil {
		t.Fatal(err)
	}
	if code, msg := apiDo(t, "POST", devices, AddDevice{ID: peer}, nil); code != http.StatusConflict || !strings.Contains(msg, "--untrusted") {
		t.Errorf("re-adding a removed receiver trusted: %d %q", code, msg)
	}
	now := time.Now()
	if err := database.AddPendingDevice(ctx, db.PendingDevice{ID: peer, Address: "127.0.0.1:1", FirstSeen: now, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	if code, _ := apiDo(t, "POST", ts.URL+"/rest/pending/accept", Accept{ID: peer}, nil); code != http.StatusConflict {
		t.Errorf("accepting a removed receiver: %d, want 409", code)
	}
	if _, err := database.Device(ctx, peer); err == nil {
		t.Error("the removed receiver was accepted")
	}
}

// TestTrustFormNeedsConfirm: the console's trust form, posted without the
// confirm page's field, does not make a receiver trusted.
func TestTrustFormNeedsConfirm(t *testing.T) {
	ts, database := newTestServer(t)
	ctx := context.Background()
	recv := deviceID(1).String()
	if err := database.PutDevice(ctx, db.Device{ID: recv, Name: xssLabel, Untrusted: true}); err != nil {
		t.Fatal(err)
	}
	c := setUp(t, ts.URL)
	code, body := getBody(t, c, ts.URL+"/devices/"+recv+"/trust")
	if code != http.StatusOK || !strings.Contains(body, "plaintext") || strings.Contains(body, xssLabel) {
		t.Fatalf("the confirm page: %d, unsafe or without the warning:\n%s", code, body)
	}
	tok := formToken(t, c, ts.URL, "/devices")
	post(t, c, ts.URL+"/devices/"+recv+"/trust", url.Values{"csrf": {tok}, "untrusted": {"0"}})
	if got := flashOf(t, c, ts.URL+"/devices"); !strings.Contains(got, "Error") {
		t.Errorf("flash %q, want an error", got)
	}
	if d, _ := database.Device(ctx, recv); !d.Untrusted {
		t.Fatal("a form without the confirmation made the receiver trusted")
	}
	tok = formToken(t, c, ts.URL, "/devices")
	post(t, c, ts.URL+"/devices/"+recv+"/trust", url.Values{"csrf": {tok}, "untrusted": {"0"}, "confirm": {"1"}})
	if d, _ := database.Device(ctx, recv); d.Untrusted {
		t.Fatal("the confirmed form did not make the receiver trusted")
	}
}
