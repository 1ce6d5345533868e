package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// apiCall sends a JSON request with the API key and returns the status.
func apiCall(t *testing.T, method, u string, body any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, u, bytes.NewReader(b))
	req.Header.Set("X-API-Key", testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func deviceID(b byte) crypt.DeviceID {
	var id crypt.DeviceID
	id[0], id[31] = b, b
	return id
}

func TestIgnorePending(t *testing.T) {
	ts, database := newTestServer(t)
	ctx := context.Background()
	d1, d2 := deviceID(1), deviceID(2)
	now := time.Now()
	if err := database.AddPendingDevice(ctx, db.PendingDevice{ID: d1.String(), Name: "stranger", Address: "127.0.0.1:1", FirstSeen: now, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []crypt.DeviceID{d1, d2} {
		if err := database.PutDevice(ctx, db.Device{ID: d.String(), Addresses: []string{"dynamic"}}); err != nil {
			t.Fatal(err)
		}
		if err := database.AddPendingFolder(ctx, db.PendingFolder{DeviceID: d.String(), FolderID: "photos", FirstSeen: now}); err != nil {
			t.Fatal(err)
		}
	}
	// d1 was pending before it was added; make it pending again.
	if err := database.AddPendingDevice(ctx, db.PendingDevice{ID: d1.String(), Address: "127.0.0.1:1", FirstSeen: now, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	u := ts.URL + "/rest/pending/ignore"
	if code := apiCall(t, "POST", u, Ignore{ID: d1.String()}); code != http.StatusNoContent {
		t.Fatalf("ignoring a pending device: %d", code)
	}
	if code := apiCall(t, "POST", u, Ignore{ID: d1.String()}); code != http.StatusNotFound {
		t.Errorf("ignoring it again: %d, want 404", code)
	}
	if code := apiCall(t, "POST", u, Ignore{ID: "photos", Device: d2.String()}); code != http.StatusNoContent {
		t.Fatalf("ignoring d2's offer: %d", code)
	}
	offers, _ := database.PendingFolders(ctx)
	if len(offers) != 1 || offers[0].DeviceID != d1.String() {
		t.Fatalf("after ignoring d2's offer: %+v", offers)
	}
	if code := apiCall(t, "POST", u, Ignore{ID: "photos", Device: "bad"}); code != http.StatusBadRequest {
		t.Errorf("a bad device: %d, want 400", code)
	}
	if code := apiCall(t, "POST", u, Ignore{ID: "photos"}); code != http.StatusNoContent {
		t.Fatalf("ignoring every offer of photos: %d", code)
	}
	if offers, _ := database.PendingFolders(ctx); len(offers) != 0 {
		t.Fatalf("offers left: %+v", offers)
	}
	if code := apiCall(t, "POST", u, Ignore{}); code != http.StatusBadRequest {
		t.Errorf("an empty body: %d, want 400", code)
	}
	pend, _ := database.PendingDevices(ctx)
	if len(pend) != 0 {
		t.Errorf("devices still pending: %+v", pend)
	}
}

func TestIgnorePendingForm(t *testing.T) {
	ts, database := newTestServer(t)
	ctx := context.Background()
	d := deviceID(3)
	now := time.Now()
	if err := database.AddPendingDevice(ctx, db.PendingDevice{ID: d.String(), Name: xssLabel, Address: "127.0.0.1:1", FirstSeen: now, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	c := setUp(t, ts.URL)
	_, body := getBody(t, c, ts.URL+"/devices")
	if !strings.Contains(body, `data-pending-device="`+d.String()+`"`) || strings.Contains(body, xssLabel) {
		t.Fatalf("the devices page does not list the pending device safely:\n%s", body)
	}
	resp := post(t, c, ts.URL+"/pending/ignore", url.Values{"id": {d.String()}, "back": {"/devices"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("ignoring without CSRF: %s", resp.Status)
	}
	tok := formToken(t, c, ts.URL, "/devices")
	resp = post(t, c, ts.URL+"/pending/ignore", url.Values{"csrf": {tok}, "id": {d.String()}, "back": {"/devices"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/devices" {
		t.Fatalf("ignoring: %s to %s", resp.Status, resp.Header.Get("Location"))
	}
	if got := flashOf(t, c, ts.URL+"/devices"); got != "Ignored." {
		t.Errorf("flash %q", got)
	}
	if pend, _ := database.PendingDevices(ctx); len(pend) != 0 {
		t.Errorf("still pending: %+v", pend)
	}
}

const xssLabel = `<img src=x onerror=alert(1)>`

func TestEditFolderLabel(t *testing.T) {
	ts, database := newTestServer(t)
	ctx := context.Background()
	if err := database.PutFolder(ctx, db.Folder{ID: "docs", Path: "/data/docs", Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	u := ts.URL + "/rest/folders/docs"
	for _, tc := range []struct {
		label string
		code  int
	}{
		{strings.Repeat("a", maxLabel-1), http.StatusOK},
		{strings.Repeat("a", maxLabel), http.StatusOK},
		{strings.Repeat("a", maxLabel+1), http.StatusBadRequest},
		{"two\nlines", http.StatusBadRequest},
		{"Documents", http.StatusOK},
	} {
		if code := apiCall(t, "PATCH", u, EditFolder{Label: tc.label}); code != tc.code {
			t.Errorf("label of %d bytes: %d, want %d", len(tc.label), code, tc.code)
		}
	}
	if code := apiCall(t, "PATCH", ts.URL+"/rest/folders/nope", EditFolder{Label: "x"}); code != http.StatusNotFound {
		t.Errorf("an unknown folder: %d", code)
	}
	f, _ := database.Folder(ctx, "docs")
	if f.Label != "Documents" {
		t.Fatalf("label %q", f.Label)
	}
	c := setUp(t, ts.URL)
	tok := formToken(t, c, ts.URL, "/folders/docs")
	resp := post(t, c, ts.URL+"/folders/docs/edit", url.Values{"csrf": {tok}, "label": {xssLabel}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/folders/docs" {
		t.Fatalf("editing: %s to %s", resp.Status, resp.Header.Get("Location"))
	}
	_, body := getBody(t, c, ts.URL+"/folders/docs")
	if strings.Contains(body, xssLabel) || !strings.Contains(body, "Folder saved.") {
		t.Fatalf("the folder page after the edit:\n%s", body)
	}
	if f, _ := database.Folder(ctx, "docs"); f.Label != xssLabel {
		t.Errorf("label %q", f.Label)
	}
}

func TestDeviceIDCheck(t *testing.T) {
	ts, _ := newTestServer(t)
	c := setUp(t, ts.URL)
	var own crypt.DeviceID
	own[0] = 7
	_, badErr := crypt.ParseDeviceID("not-an-id")
	for in, want := range map[string]string{
		deviceID(4).String(): "valid device ID",
		own.String():         "this is this device",
		"not-an-id":          badErr.Error(),
		"":                   "",
	} {
		_, body := getBody(t, c, ts.URL+"/fragments/device-id?"+url.Values{"id": {in}}.Encode())
		if want == "" && strings.TrimSpace(body) != "" || want != "" && !strings.Contains(body, htmlEscape(want)) {
			t.Errorf("check of %q: %q, want %q", in, body, want)
		}
	}
	if code, _ := getBody(t, browser(t), ts.URL+"/fragments/device-id?id=x"); code != http.StatusSeeOther {
		t.Errorf("without a session: %d", code)
	}
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

func TestRemoveDeviceConfirm(t *testing.T) {
	ts, database := newTestServer(t)
	ctx := context.Background()
	d := deviceID(5)
	if err := database.PutDevice(ctx, db.Device{ID: d.String(), Name: "laptop", Addresses: []string{"dynamic"}}); err != nil {
		t.Fatal(err)
	}
	c := setUp(t, ts.URL)
	code, body := getBody(t, c, ts.URL+"/devices/"+d.String()+"/remove")
	if code != http.StatusOK || !strings.Contains(body, "Remove the device laptop") {
		t.Fatalf("confirm page: %d\n%s", code, body)
	}
	if _, err := database.Device(ctx, d.String()); err != nil {
		t.Fatalf("the confirm page removed the device: %v", err)
	}
	if resp := post(t, c, ts.URL+"/devices/"+d.String()+"/remove", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("removing without CSRF: %s", resp.Status)
	}
	tok := csrfField.FindStringSubmatch(body)[1]
	resp := post(t, c, ts.URL+"/devices/"+d.String()+"/remove", url.Values{"csrf": {tok}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("removing: %s", resp.Status)
	}
	if _, err := database.Device(ctx, d.String()); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("device after removal: %v", err)
	}
	if code, _ := getBody(t, c, ts.URL+"/devices/"+d.String()+"/remove"); code != http.StatusNotFound {
		t.Errorf("confirm page of a removed device: %d", code)
	}
}

// TestRemoveFolderKeepsFiles: removing a folder asks first, says the
// files stay, forgets the folder and leaves its files on disk.
func TestRemoveFolderKeepsFiles(t *testing.T) {
	ts, database := newTestServer(t)
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(file, []byte("stay"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := database.PutFolder(ctx, db.Folder{ID: "docs", Label: "Documents", Path: dir, Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	c := setUp(t, ts.URL)
	code, body := getBody(t, c, ts.URL+"/folders/docs/remove")
	if code != http.StatusOK || !strings.Contains(body, "never deletes files on disk") {
		t.Fatalf("confirm page: %d\n%s", code, body)
	}
	tok := csrfField.FindStringSubmatch(body)[1]
	resp := post(t, c, ts.URL+"/folders/docs/remove", url.Values{"csrf": {tok}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/folders" {
		t.Fatalf("removing: %s to %s", resp.Status, resp.Header.Get("Location"))
	}
	if _, err := database.Folder(ctx, "docs"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("folder after removal: %v", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "stay" {
		t.Fatalf("the folder's file after removal: %q, %v", b, err)
	}
}
