package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/engine"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

// offline is a network without peers, for an engine whose folders share
// with nobody connected.
type offline struct{}

func (offline) Connected(crypt.DeviceID) bool { return false }
func (offline) RequestPeer(context.Context, crypt.DeviceID, *protocol.Request) ([]byte, error) {
	return nil, errors.New("offline")
}
func (offline) Refresh(context.Context)          {}
func (offline) Announce(context.Context, string) {}

// controlServer serves the API over a real engine and SQLite, with folder
// "f" (send-receive, at the returned directory), the encrypted folder
// "enc" and a device.
func controlServer(t *testing.T) (base, dir string, dev crypt.DeviceID, d *db.DB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := db.Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	dev = crypt.DeviceID{3}
	for _, err := range []error{
		d.PutFolder(ctx, db.Folder{ID: "f", Path: dir, Type: db.SendReceive}),
		d.PutFolder(ctx, db.Folder{ID: "enc", Path: t.TempDir(), Type: db.Encrypted}),
		d.PutDevice(ctx, db.Device{ID: dev.String(), Name: "laptop"}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	self := crypt.DeviceID{7}
	eng := engine.New(self, d, log, engine.Options{Net: offline{}})
	done := make(chan error, 1)
	go func() { done <- eng.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	s, err := New(ctx, "127.0.0.1:0", Config{ID: self, DB: d, Conns: fakeConns{}, Engine: eng, APIKey: testKey, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := serveTest(t, s)
	testutil.Eventually(t, 10*time.Second, "folder f to run", func() bool {
		_, ok := eng.FolderStatus("f")
		return ok
	})
	return ts.URL, dir, dev, d
}

// call sends a REST request with the API key and returns the status and
// the body.
func call(t *testing.T, method, url string, body any) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestFolderControlsREST: pause, type and ignores of a folder, with the
// answers for a paused, encrypted or unknown folder and bad input.
func TestFolderControlsREST(t *testing.T) {
	base, dir, _, d := controlServer(t)
	ctx := context.Background()
	expect := func(method, path string, body any, code int, want string) {
		t.Helper()
		got, b := call(t, method, base+path, body)
		if got != code || !strings.Contains(b, want) {
			t.Errorf("%s %s: %d %s; want %d with %q", method, path, got, b, code, want)
		}
	}

	expect(http.MethodPut, "/rest/folders/f/type", FolderType{Type: "bogus"}, 400, "unknown folder type")
	expect(http.MethodPut, "/rest/folders/f/type", FolderType{Type: "encrypted"}, 400, "cannot become encrypted")
	expect(http.MethodPut, "/rest/folders/enc/type", FolderType{Type: "sendonly"}, 400, "keeps its type")
	expect(http.MethodPut, "/rest/folders/nope/type", FolderType{Type: "sendonly"}, 404, "no folder")
	expect(http.MethodPut, "/rest/folders/f/type", FolderType{Type: "receiveonly"}, 204, "")
	if f, _ := d.Folder(ctx, "f"); f.Type != db.ReceiveOnly {
		t.Errorf("type after PUT: %s", f.Type)
	}

	expect(http.MethodPost, "/rest/folders/enc/pause", nil, 400, "pause the devices")
	expect(http.MethodPost, "/rest/folders/nope/pause", nil, 404, "no folder")
	expect(http.MethodPost, "/rest/folders/f/pause", nil, 204, "")
	expect(http.MethodGet, "/rest/folders", nil, 200, `"state":"paused"`)
	expect(http.MethodGet, "/rest/folders/f/needed", nil, 409, "paused")
	expect(http.MethodGet, "/rest/folders/f/changes", nil, 409, "paused")
	expect(http.MethodPost, "/rest/folders/f/scan", nil, 409, "paused")
	// Ignores are the folder's files: they can be edited while it is paused.
	expect(http.MethodPut, "/rest/folders/f/ignores", Ignores{Text: "*.tmp\n"}, 204, "")
	expect(http.MethodPut, "/rest/folders/f/ignores", Ignores{Text: "ok\nbad\x00\n"}, 400, "line 2")
	expect(http.MethodGet, "/rest/folders/f/ignores", nil, 200, `{"text":"*.tmp\n"}`)
	if b, _ := os.ReadFile(filepath.Join(dir, ".lockstepignore")); string(b) != "*.tmp\n" {
		t.Errorf(".lockstepignore: %q", b)
	}
	expect(http.MethodGet, "/rest/folders/enc/ignores", nil, 400, "no ignore patterns")

	expect(http.MethodPost, "/rest/folders/f/resume", nil, 204, "")
	if f, _ := d.Folder(ctx, "f"); f.Paused {
		t.Error("still paused after resume")
	}
	testutil.Eventually(t, 10*time.Second, "the resumed folder to answer", func() bool {
		code, _ := call(t, http.MethodGet, base+"/rest/folders/f/needed", nil)
		return code == 200
	})
	expect(http.MethodGet, "/rest/folders/f/needed", nil, 200, `{"total":0,"items":[]}`)
	expect(http.MethodGet, "/rest/folders/f/needed?limit=0", nil, 400, "limit must be")
	expect(http.MethodGet, "/rest/folders/f/needed?limit=1001", nil, 400, "limit must be")
	expect(http.MethodGet, "/rest/folders/nope/needed", nil, 404, "no folder")
	expect(http.MethodPost, "/rest/scan", nil, 204, "")
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(http.MethodPost, "/rest/scan", nil, 204, "")
	testutil.Eventually(t, 10*time.Second, "new.txt in the recent changes", func() bool {
		_, b := call(t, http.MethodGet, base+"/rest/folders/f/changes", nil)
		var cl ChangeList
		json.Unmarshal([]byte(b), &cl)
		// Anywhere in the list: a scan that also found the ignore file
		// (slow to come after its edit) numbers its batch in random order.
		for _, c := range cl.Changes {
			if c.Name == "new.txt" {
				return c.Local && c.DeviceName == "this device"
			}
		}
		return false
	})
}

// TestDeviceControlsREST: pausing and renaming a device, and bad input.
func TestDeviceControlsREST(t *testing.T) {
	base, _, dev, d := controlServer(t)
	ctx := context.Background()
	id := dev.String()
	expect := func(method, path string, body any, code int, want string) {
		t.Helper()
		got, b := call(t, method, base+path, body)
		if got != code || !strings.Contains(b, want) {
			t.Errorf("%s %s: %d %s; want %d with %q", method, path, got, b, code, want)
		}
	}
	unknown := crypt.DeviceID{4}.String()
	expect(http.MethodPost, "/rest/devices/"+unknown+"/pause", nil, 404, "no device")
	expect(http.MethodPost, "/rest/devices/not-an-id/pause", nil, 400, "")
	expect(http.MethodPost, "/rest/devices/"+id+"/pause", nil, 204, "")
	expect(http.MethodGet, "/rest/devices", nil, 200, `"paused":true`)
	if got, _ := d.Device(ctx, id); !got.Paused {
		t.Error("not paused in the database")
	}
	expect(http.MethodPost, "/rest/devices/"+id+"/resume", nil, 204, "")
	if got, _ := d.Device(ctx, id); got.Paused {
		t.Error("still paused after resume")
	}

	expect(http.MethodPut, "/rest/devices/"+id+"/name", RenameDevice{Name: "  "}, 400, "needs a name")
	expect(http.MethodPut, "/rest/devices/"+id+"/name", RenameDevice{Name: "a\x07b"}, 400, "control characters")
	expect(http.MethodPut, "/rest/devices/"+id+"/name", RenameDevice{Name: strings.Repeat("x", 300)}, 400, "a name is at most")
	expect(http.MethodPut, "/rest/devices/"+unknown+"/name", RenameDevice{Name: "x"}, 404, "no device")
	expect(http.MethodPut, "/rest/devices/"+id+"/name", RenameDevice{Name: " old laptop "}, 200, `"name":"old laptop"`)
	if got, _ := d.Device(ctx, id); got.Name != "old laptop" {
		t.Errorf("name in the database: %q", got.Name)
	}
}

// TestControlsNeedTheEngine: an engine without the controls (a test's)
// answers 501 rather than failing.
func TestControlsNeedTheEngine(t *testing.T) {
	ts, _ := newTestServer(t)
	if code, b := call(t, http.MethodPost, ts.URL+"/rest/scan", nil); code != http.StatusNotImplemented {
		t.Errorf("POST /rest/scan on a fake engine: %d %s", code, b)
	}
}
