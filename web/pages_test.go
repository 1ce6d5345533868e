package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/connections"
	"lockstep/sync/engine"
	"lockstep/sync/events"
	"lockstep/sync/versions"
)

// phoneEngine runs "docs", syncing, with local and receiver versions of
// a file whose name is long.
type phoneEngine struct {
	*versionsEngine
}

func (phoneEngine) FolderStatus(id string) (engine.FolderStatus, bool) {
	if id != "docs" {
		return engine.FolderStatus{}, false
	}
	st := engine.FolderStatus{State: "syncing", PullTotal: 4 << 20, PullDone: 1 << 20}
	st.LocalFiles, st.LocalBytes, st.GlobalFiles, st.GlobalBytes = 3, 3<<20, 7, 7<<20
	st.NeedFiles, st.NeedBytes = 4, 4<<20
	return st, true
}

func (phoneEngine) Versioning(context.Context, string) (versions.Policy, error) {
	return versions.Policy{Type: versions.Simple, Keep: 5}, nil
}

// The everyday controls of the folder page: nothing needed, nothing
// changed, no ignore patterns.
func (phoneEngine) ScanAll() {}
func (phoneEngine) Needed(context.Context, string, int) ([]engine.Needed, int, error) {
	return nil, 0, nil
}
func (phoneEngine) RecentChanges(context.Context, string) ([]engine.Change, error) { return nil, nil }
func (phoneEngine) Ignores(context.Context, string) (string, error)                { return "", nil }
func (phoneEngine) SetIgnores(context.Context, string, string) error               { return nil }

// Names long enough to overflow a phone's width unless they wrap.
const (
	longName   = "a-device-name-that-goes-on-and-on-without-any-space-at-all"
	longFolder = "photos-of-the-whole-family-from-every-holiday"
	longFile   = "holiday/2026/a-file-name-that-goes-on-and-on-without-any-space-at-all.jpg"
)

// phoneServer serves a node with everything a page can show: a trusted
// and an untrusted device with long names, a pending device and an
// encrypted folder offer, a syncing folder shared with both devices, a
// receiver's encrypted folder, and versions of a long file name.
func phoneServer(t *testing.T) (*liveServer, crypt.DeviceID) {
	t.Helper()
	base := time.Date(2026, 12, 4, 3, 30, 1, 0, time.UTC)
	var laptop, vps, stranger crypt.DeviceID
	laptop[0], vps[0], stranger[0] = 1, 2, 3
	eng := phoneEngine{&versionsEngine{
		local: []versions.Version{
			{Path: longFile, ID: "v-2", Time: base.Add(time.Hour), Size: 2 << 20},
			{Path: longFile, ID: "v-1", Time: base, Size: 1 << 20},
		},
		remote: []backup.ReceiverVersion{
			{Path: longFile, ID: "02-2", Stored: base.Add(2 * time.Hour), Size: 3 << 20, Receiver: vps},
			{Path: longFile, ID: "02-1", Stored: base, Size: 1 << 20, Receiver: vps},
		},
	}}
	ls := startServer(t, events.NewBus(0), eng, func(s *Server) { s.cfg.Receiver = &fakeReceiver{} })
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ls.db.PutDevice(ctx, db.Device{ID: laptop.String(), Name: longName, Addresses: []string{"tcp://laptop-with-a-long-host-name.example.org:22100"}}))
	must(ls.db.PutDevice(ctx, db.Device{ID: vps.String(), Name: "vps", Addresses: []string{"dynamic"}, Untrusted: true}))
	must(ls.db.PutFolder(ctx, db.Folder{ID: "docs", Label: longFolder, Path: "/home/someone/" + longFolder, Type: db.SendReceive}))
	must(ls.db.PutFolder(ctx, db.Folder{ID: "vault", Path: "/srv/lockstep/" + longFolder, Type: db.Encrypted}))
	must(ls.db.ShareFolder(ctx, "docs", laptop.String()))
	must(ls.db.ShareFolder(ctx, "docs", vps.String()))
	must(ls.db.ShareFolder(ctx, "vault", laptop.String()))
	must(ls.db.AddPendingDevice(ctx, db.PendingDevice{ID: stranger.String(), Name: longName, Address: "192.168.100.200:54321"}))
	must(ls.db.AddPendingFolder(ctx, db.PendingFolder{DeviceID: laptop.String(), FolderID: longFolder, Label: longFolder, Encrypted: true}))
	must(ls.db.PutFiles(ctx, "docs", db.LocalDevice, []db.FileRecord{
		{Name: longFile, Type: db.TypeFile, Size: 3 << 20, ModTime: base, Sequence: 1},
		{Name: "holiday", Type: db.TypeDir, ModTime: base, Sequence: 2},
	}))
	return ls, laptop
}

// overflow is a script that lists what does not fit the page's width:
// the page itself when it scrolls sideways, and every control or link
// that reaches beyond the viewport.
const overflow = `(() => {
	const w = document.documentElement.clientWidth;
	const out = [];
	if (document.documentElement.scrollWidth > w) out.push("the page is " + document.documentElement.scrollWidth + " px wide");
	document.querySelectorAll("button, a, input, select, textarea, progress").forEach(e => {
		const r = e.getBoundingClientRect();
		if (r.width === 0 && r.height === 0) return;
		if (r.right > w + 0.5 || r.left < -0.5) out.push(e.tagName + " " + (e.id || e.className || e.name || e.textContent.trim().slice(0, 30)) + " spans " + Math.round(r.left) + " to " + Math.round(r.right));
	});
	return out;
})()`

// TestPagesFitPhone: at 390 px (a phone) and at desktop width every page
// fits: no sideways scrolling, every button and link within the viewport.
func TestPagesFitPhone(t *testing.T) {
	ls, laptop := phoneServer(t)
	tab := consoleTab(t, ls)
	pages := []string{
		"/", "/devices", "/folders", "/folders/docs", "/folders/vault",
		"/folders/docs/versions?path=" + longFile, "/folders/docs/settings", "/folders/vault/settings",
		"/devices/" + laptop.String() + "/trust", "/devices/" + laptop.String() + "/remove", "/folders/docs/remove",
	}
	for _, width := range []int64{390, 1280} {
		ctx, cancel := context.WithTimeout(tab, waitTimeout)
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 844, chromedp.EmulateMobile)); err != nil {
			t.Fatal(err)
		}
		cancel()
		check := func(p string) {
			t.Helper()
			ctx, cancel := context.WithTimeout(tab, waitTimeout)
			defer cancel()
			if err := chromedp.Do(ctx, chromedp.Navigate(ls.base+p), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
				t.Fatalf("opening %s: %v", p, err)
			}
			bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](overflow))
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) > 0 {
				t.Errorf("at %d px, %s does not fit:\n  %s", width, p, strings.Join(bad, "\n  "))
			}
			// To look at them: LOCKSTEP_SCREENSHOTS=DIR.
			if dir := os.Getenv("LOCKSTEP_SCREENSHOTS"); dir != "" {
				png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("phone-%d%s.png", width, strings.NewReplacer("/", "_", "?", "_", "=", "_").Replace(p))
				if len(name) > 80 {
					name = name[:76] + ".png"
				}
				if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, p := range pages {
			check(p)
		}
		// Logged out: the login page.
		ctx, cancel = context.WithTimeout(tab, waitTimeout)
		if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		cancel()
		check("/login")
		sid := ls.sessions.create()
		httpOnly := true
		ctx, cancel = context.WithTimeout(tab, waitTimeout)
		if _, err := chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{Name: ls.cookie(sessionCookie), Value: sid, URL: ls.base, HTTPOnly: &httpOnly}); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	// The setup page, of a node without a password yet.
	fresh := startServer(t, nil, fakeEngine{}, nil)
	ctx, cancel := context.WithTimeout(tab, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(fresh.base+"/setup"), chromedp.WaitReady(chromedp.CSS("#setup"))); err != nil {
		t.Fatal(err)
	}
	if bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](overflow)); err != nil || len(bad) > 0 {
		t.Errorf("at 390 px the setup page does not fit: %v %s", err, strings.Join(bad, "; "))
	}
}

// pullEngine reports "docs" syncing, done bytes of 3 MiB, in a folder of
// three files in one directory here and a directory more in all.
type pullEngine struct {
	fakeEngine
	done atomic.Int64
}

func (e *pullEngine) FolderStatus(id string) (engine.FolderStatus, bool) {
	if id != "docs" {
		return engine.FolderStatus{}, false
	}
	st := engine.FolderStatus{State: "syncing", PullTotal: 3 << 20, PullDone: e.done.Load()}
	st.LocalFiles, st.LocalDirectories, st.LocalBytes = 3, 1, 1<<20
	st.GlobalFiles, st.GlobalDirectories, st.GlobalBytes = 4, 2, 4<<20
	st.NeedFiles, st.NeedDirectories, st.NeedBytes = 1, 1, 3<<20
	return st, true
}

// TestFolderProgressAndCounts: next to a pull's progress bar the folders
// panel shows its rate and the time left once it has been watched a
// while, and it counts files and directories apart, here and in all.
func TestFolderProgressAndCounts(t *testing.T) {
	eng := &pullEngine{}
	clock := time.Date(2026, 12, 4, 3, 30, 1, 0, time.UTC)
	ls := startServer(t, nil, eng, func(s *Server) { s.rates.now = func() time.Time { return clock } })
	addDocs(t, ls)
	c := setUp(t, ls.base)
	panel := getPage(t, c, ls.base+"/fragments/folders")
	for _, want := range []string{"here 3 files, 1 directory, 1.0 MiB", "in all 4 files, 2 directories, 4.0 MiB", "needs 1 file, 1 directory (3.0 MiB)", "0 B of 3.0 MiB</span>"} {
		if !strings.Contains(panel, want) {
			t.Errorf("the panel lacks %q:\n%s", want, panel)
		}
	}
	clock = clock.Add(2 * time.Second)
	eng.done.Store(1 << 20)
	panel = getPage(t, c, ls.base+"/fragments/folders")
	if want := "1.0 MiB of 3.0 MiB, 512.0 KiB/s, less than a minute left"; !strings.Contains(panel, want) {
		t.Errorf("the panel lacks %q:\n%s", want, panel)
	}
	var st Status
	resp, err := c.Get(ls.base + "/rest/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	f := st.Folders[0]
	if f.LocalFiles != 3 || f.LocalDirectories != 1 || f.GlobalDirectories != 2 || f.NeedDirectories != 1 || f.PullBytesPerSecond != 512<<10 || f.PullSecondsLeft != 4 {
		t.Errorf("status: %+v", f)
	}
}

func TestTimeLeft(t *testing.T) {
	for secs, want := range map[int64]string{
		5: "less than a minute left", 150: "about 3 min left", 3*3600 + 20*60: "about 3h20m left", 5 * 86400: "about 5 days left",
	} {
		if got := timeLeft(secs); got != want {
			t.Errorf("timeLeft(%d) = %q, want %q", secs, got, want)
		}
	}
}

// liveConns reports the device it holds as connected.
type liveConns struct{ id crypt.DeviceID }

func (c liveConns) Connections() []connections.Info {
	return []connections.Info{{ID: c.id, Addr: "192.0.2.1:22100", Type: "lan"}}
}
func (liveConns) Reload() {}

// TestAcceptPendingDevice: a pending device is accepted with the name it
// announced (or one typed) and the trust chosen, and the flash says so;
// without a choice of trust nothing is added.
func TestAcceptPendingDevice(t *testing.T) {
	ls := startServer(t, nil, fakeEngine{}, nil)
	ctx := context.Background()
	var laptop, phone crypt.DeviceID
	laptop[0], phone[0] = 1, 2
	for _, d := range []crypt.DeviceID{laptop, phone} {
		if err := ls.db.AddPendingDevice(ctx, db.PendingDevice{ID: d.String(), Name: "laptop-b", Address: "192.0.2.1:22100"}); err != nil {
			t.Fatal(err)
		}
	}
	c := setUp(t, ls.base)
	body := getPage(t, c, ls.base+"/devices")
	for _, want := range []string{`name="name" class="accept-name" value="laptop-b"`, `value="trusted" class="accept-trusted" checked`, `value="untrusted" class="accept-untrusted">`} {
		if !strings.Contains(body, want) {
			t.Fatalf("the devices page lacks %s:\n%s", want, body)
		}
	}
	tok := formToken(t, c, ls.base, "/devices")
	accept := func(id crypt.DeviceID, form url.Values) string {
		t.Helper()
		form.Set("csrf", tok)
		form.Set("id", id.String())
		if resp := post(t, c, ls.base+"/pending/accept", form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST accept: %s", resp.Status)
		}
		return flashOf(t, c, ls.base+"/devices")
	}
	if got := accept(laptop, url.Values{"name": {"laptop-b"}}); !strings.HasPrefix(got, "Error: Choose whether the device is trusted") {
		t.Errorf("no trust chosen: flash %q", got)
	}
	if _, err := ls.db.Device(ctx, laptop.String()); err == nil {
		t.Fatal("a device was added without a choice of trust")
	}
	if got := accept(laptop, url.Values{"name": {"laptop-b"}, "trust": {"untrusted"}}); got != "Accepted device laptop-b as untrusted." {
		t.Errorf("flash %q", got)
	}
	if d, err := ls.db.Device(ctx, laptop.String()); err != nil || d.Name != "laptop-b" || !d.Untrusted {
		t.Errorf("accepted device %+v, %v: want laptop-b, untrusted", d, err)
	}
	if got := accept(phone, url.Values{"name": {" my phone "}, "trust": {"trusted"}}); got != "Accepted device my phone as trusted." {
		t.Errorf("flash %q", got)
	}
	if d, err := ls.db.Device(ctx, phone.String()); err != nil || d.Name != "my phone" || d.Untrusted {
		t.Errorf("accepted device %+v, %v: want my phone, trusted", d, err)
	}
	if p, _ := ls.db.PendingDevices(ctx); len(p) != 0 {
		t.Errorf("still pending: %+v", p)
	}
}

// TestFormFlashes: the flashes of the forms say what happened, by name;
// sharing with an untrusted device asks for the password twice alike,
// in the page's words; a connected device shows no "last seen".
func TestFormFlashes(t *testing.T) {
	var laptop, vps crypt.DeviceID
	laptop[0], vps[0] = 1, 2
	ls := startServer(t, nil, fakeEngine{}, func(s *Server) { s.cfg.Conns = liveConns{laptop} })
	ctx := context.Background()
	c := setUp(t, ls.base)
	tok := formToken(t, c, ls.base, "/devices")
	send := func(path, back string, form url.Values) string {
		t.Helper()
		form.Set("csrf", tok)
		if resp := post(t, c, ls.base+path, form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
		return flashOf(t, c, ls.base+back)
	}
	if got := send("/devices", "/devices", url.Values{"id": {laptop.String()}, "name": {"laptop-b"}}); got != "Added device laptop-b as trusted." {
		t.Errorf("adding a device: %q", got)
	}
	if got := send("/devices", "/devices", url.Values{"id": {vps.String()}, "name": {"vps"}, "untrusted": {"1"}}); got != "Added device vps as untrusted." {
		t.Errorf("adding a device: %q", got)
	}
	dir := t.TempDir()
	if got := send("/folders", "/folders", url.Values{"id": {"docs"}, "path": {dir}, "type": {"sendreceive"}}); got != "Added folder docs at "+dir+"." {
		t.Errorf("adding a folder: %q", got)
	}
	if got := send("/folders/share", "/folders", url.Values{"folder": {"docs"}, "device": {laptop.String()}}); got != "Shared folder docs with laptop-b." {
		t.Errorf("sharing: %q", got)
	}
	if got := send("/folders/share", "/folders", url.Values{"folder": {"docs"}, "device": {vps.String()}}); got != "Error: Enter the folder password: the untrusted device gets only data encrypted with it" {
		t.Errorf("sharing without a password: %q", got)
	}
	if got := send("/folders/share", "/folders", url.Values{"folder": {"docs"}, "device": {vps.String()}, "password": {"one password"}, "password2": {"another"}}); !strings.HasPrefix(got, "Error: The two passwords differ") {
		t.Errorf("sharing with passwords that differ: %q", got)
	}
	body := getPage(t, c, ls.base+"/folders")
	for _, want := range []string{`id="share-password2"`, "nobody can recover it"} {
		if !strings.Contains(body, want) {
			t.Errorf("the share form lacks %q", want)
		}
	}
	// Offered by a device with a name: accepted "from" it.
	if err := ls.db.AddPendingFolder(ctx, db.PendingFolder{DeviceID: laptop.String(), FolderID: "photos"}); err != nil {
		t.Fatal(err)
	}
	if got := send("/pending/accept", "/folders", url.Values{"id": {"photos"}, "path": {filepath.Join(t.TempDir(), "photos")}}); got != "Accepted folder photos from laptop-b." {
		t.Errorf("accepting a folder: %q", got)
	}
	if got := send("/devices/"+laptop.String()+"/trust", "/devices", url.Values{"untrusted": {"1"}}); got != "laptop-b is now untrusted: it gets only encrypted data." {
		t.Errorf("making a device untrusted: %q", got)
	}
	// The connected laptop shows no "last seen", the vps does.
	if err := ls.db.TouchDevice(ctx, laptop.String(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	body = getPage(t, c, ls.base+"/fragments/devices")
	row := func(id crypt.DeviceID) string {
		i := strings.Index(body, `<tr data-device="`+id.String()+`">`)
		j := strings.Index(body[i:], "</tr>")
		return body[i : i+j]
	}
	if r := row(laptop); strings.Contains(r, "ago") || strings.Contains(r, "never") {
		t.Errorf("the connected device shows a last seen: %s", r)
	}
	if r := row(vps); !strings.Contains(r, `data-label="Last seen">never</td>`) {
		t.Errorf("the disconnected device shows no last seen: %s", r)
	}
}

// TestPanelRequestWithoutSession: a page's own request without a live
// session gets 401 and HX-Redirect to the login page (to setup before
// the first run), a page load a redirect; /fragments/alive answers 204
// while the session lives.
func TestPanelRequestWithoutSession(t *testing.T) {
	ls := startServer(t, nil, fakeEngine{}, nil)
	ask := func(c *http.Client, path string, panel bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, ls.base+path, nil)
		if panel {
			req.Header.Set("HX-Request", "true")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	anon := browser(t)
	if resp := ask(anon, "/fragments/devices", true); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("HX-Redirect") != "/setup" {
		t.Errorf("before setup: %s, HX-Redirect %q", resp.Status, resp.Header.Get("HX-Redirect"))
	}
	c := setUp(t, ls.base)
	if resp := ask(c, "/fragments/alive", true); resp.StatusCode != http.StatusNoContent {
		t.Errorf("alive with a session: %s", resp.Status)
	}
	ls.sessions.removeAll()
	for _, p := range []string{"/fragments/devices", "/fragments/folders", "/fragments/alive"} {
		if resp := ask(c, p, true); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("HX-Redirect") != "/login" {
			t.Errorf("%s after the session ended: %s, HX-Redirect %q", p, resp.Status, resp.Header.Get("HX-Redirect"))
		}
	}
	if resp := ask(c, "/devices", false); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("a page load after the session ended: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
}
