package test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"lockstep/crypt"
	"lockstep/test/testutil"
	"lockstep/web"
)

// xssName is a file and device name that runs a script if a page ever
// inserts it as HTML.
const xssName = "<img src=x onerror=alert(1)>"

const consolePassword = "console test password"

// chromium returns the Chromium binary for the browser tests: the one named
// by $LOCKSTEP_CHROMIUM, else the Debian package's. Without one the test is
// skipped, or fails under CI=true.
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv("LOCKSTEP_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium not found at %s (set LOCKSTEP_CHROMIUM)", path)
		}
		t.Skipf("chromium not found at %s (set LOCKSTEP_CHROMIUM)", path)
	}
	return path
}

// console is one browser tab on a node's console. Every JavaScript dialog
// it meets is counted and dismissed.
type console struct {
	t       *testing.T
	n       *node
	ctx     context.Context
	dialogs *atomic.Int32
}

// newBrowser starts a headless Chromium for the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return bctx
}

// openConsole opens a new tab on n's console in the browser.
func openConsole(t *testing.T, browser context.Context, n *node) *console {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	c := &console{t: t, n: n, ctx: ctx, dialogs: &atomic.Int32{}}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			c.dialogs.Add(1)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return c
}

// run runs browser steps with a timeout, failing the test on error.
func (c *console) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		c.t.Fatalf("%s on %s: %v\n%s", what, c.n.name, err, c.dump())
	}
}

// dump describes the page for a failure message.
func (c *console) dump() string {
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	var cookies []string
	if res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{}); err == nil {
		for _, ck := range res.Cookies {
			cookies = append(cookies, ck.Name+"="+ck.Value)
		}
	}
	return "page " + loc + " with cookies " + strings.Join(cookies, "; ") + ":\n" + html
}

// get runs one browser action that gives a value.
func get[T any](c *console, what string, a chromedp.Action[T]) T {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		c.t.Fatalf("%s on %s: %v", what, c.n.name, err)
	}
	return v
}

// text returns the visible text of the first element matching the CSS
// selector sel, waiting for one to appear. It reads in one script rather
// than through chromedp's node IDs, which a DOM change between the query
// and the read can invalidate ("No node with given id found").
func (c *console) text(sel string) string {
	c.t.Helper()
	// An array, because an empty text is falsy and would keep the poll going.
	got := get(c, "reading "+sel, chromedp.Poll[[]string](`(e => e && [e.innerText])(document.querySelector(`+strconv.Quote(sel)+`))`))
	return got[0]
}

// count returns how many elements match the CSS selector sel.
func (c *console) count(sel string) int {
	c.t.Helper()
	return get(c, "counting "+sel, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
}

// visit loads path and waits until sel is visible.
func (c *console) visit(path, sel string) {
	c.t.Helper()
	c.run("opening "+path, chromedp.Navigate(c.n.GUI+path), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// submit fills the form fields (CSS selector -> value), clicks button and
// waits for the next page to show want.
func (c *console) submit(what string, fields map[string]string, button, want string) {
	c.t.Helper()
	// Mark the page, so that want is looked for on the page the form leads
	// to: the old one may show it too (an earlier flash message, the list
	// before a search).
	get(c, "marking the page", chromedp.Evaluate[bool](`(document.documentElement.dataset.old = "1", true)`))
	want = "html:not([data-old]) " + want
	c.run(what, setAndClick(fields, button), chromedp.WaitVisible(chromedp.CSS(want)))
}

// click clicks the first element matching sel, once there is one.
func (c *console) click(what, sel string) {
	c.t.Helper()
	c.run(what, setAndClick(nil, sel))
}

// setAndClick waits until the page has the fields (CSS selector -> value)
// and a visible button, then sets the fields' values as chromedp.SetValue does (with
// input and change events) and clicks the button, all in one script: the
// page cannot change in between, as it can between chromedp's query of a
// node and its use (an htmx refresh replaces rows every two seconds, and
// the action fails with "No node with given id found").
func setAndClick(fields map[string]string, button string) chromedp.Action[chromedp.Void] {
	if fields == nil {
		fields = map[string]string{}
	}
	js, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	return chromedp.Poll[chromedp.Void](`(() => {
		const fields = ` + string(js) + `;
		const button = document.querySelector(` + strconv.Quote(button) + `);
		const els = Object.keys(fields).map(s => document.querySelector(s));
		if (!button || els.includes(null)) return false;
		// Only what a user could click: laid out, as chromedp's wait has it.
		if (!(button.offsetWidth || button.offsetHeight || button.getClientRects().length)) return false;
		els.forEach((e, i) => {
			e.value = Object.values(fields)[i];
			e.dispatchEvent(new Event("input", {bubbles: true}));
			e.dispatchEvent(new Event("change", {bubbles: true}));
		});
		button.click();
		return true;
	})()`)
}

// screenshot saves the page to $LOCKSTEP_SCREENSHOTS/name.png when set.
// Folder paths, temporary directories of the test machine, show as
// ~/Sync/<folder ID> so the shots read well in the docs.
func (c *console) screenshot(name string) {
	c.t.Helper()
	dir := os.Getenv("LOCKSTEP_SCREENSHOTS")
	if dir == "" {
		return
	}
	get(c, "tidying paths", chromedp.Evaluate[bool](`(document.querySelectorAll("tr[data-folder] small.path").forEach(e =>
		e.textContent = "~/Sync/" + e.closest("tr").dataset.folder), true)`))
	png := get(c, "screenshot", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// setUp takes a fresh node's console through the first run and a login.
func (c *console) setUp() {
	c.t.Helper()
	c.visit("/", "#setup")
	if loc := get(c, "location", chromedp.Location()); !strings.HasSuffix(loc, "/setup") {
		c.t.Fatalf("first visit landed on %s, want /setup", loc)
	}
	// The first run asks for the setup token the node wrote to its home.
	b, err := os.ReadFile(filepath.Join(c.n.home, "setup-token"))
	if err != nil {
		c.t.Fatalf("reading the setup token: %v", err)
	}
	token := strings.TrimSpace(string(b))
	c.submit("setting mismatched passwords", map[string]string{"#token": token, "#password": consolePassword, "#confirm": consolePassword + "!"}, "#setup", "#error")
	if got := c.text("#error"); !strings.Contains(got, "do not match") {
		c.t.Fatalf("mismatched passwords: page says %q", got)
	}
	c.submit("setting the password", map[string]string{"#token": token, "#password": consolePassword, "#confirm": consolePassword}, "#setup", "#device-id")
	if got := c.text("#device-id"); got != c.n.ID {
		c.t.Fatalf("dashboard shows device ID %q, want %q", got, c.n.ID)
	}
	c.submit("logging out", nil, "#logout", "#login")
	c.submit("wrong login", map[string]string{"#password": "not the password"}, "#login", "#error")
	if got := c.text("#error"); got != "wrong password" {
		c.t.Fatalf("wrong password: page says %q", got)
	}
	c.submit("login", map[string]string{"#password": consolePassword}, "#login", "#device-id")
	if w := get(c, "QR width", chromedp.Evaluate[int](`new Promise(done => {
		const img = document.getElementById("qr");
		if (img.complete) { done(img.naturalWidth); return; }
		img.addEventListener("load", () => done(img.naturalWidth));
		img.addEventListener("error", () => done(0));
	})`, chromedp.EvalAwaitPromise)); w == 0 {
		c.t.Fatal("the QR code image did not load")
	}
}

// flashIsError reports whether the page's flash message shows as an error.
func (c *console) flashIsError() bool {
	c.t.Helper()
	return get(c, "the flash's style", chromedp.Evaluate[bool](`(e => !!e && e.classList.contains("flash-error") && e.getAttribute("role") === "alert")(document.getElementById("flash"))`))
}

// waitConnected waits until the devices list (refreshed by htmx) shows id
// as connected, without reloading the page.
func (c *console) waitConnected(id string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, converge)
	defer cancel()
	sel := chromedp.CSS(`tr[data-device="` + id + `"] .state-connected`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(sel)); err != nil {
		c.t.Fatalf("%s's console never showed %s connected: %v", c.n.name, id, err)
	}
}

// TestConsoleBrowser drives two real nodes' consoles in headless Chromium:
// first run, login, pairing, adding and sharing a folder, seeing a file
// sync, and names that are HTML showing as text.
func TestConsoleBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	browser := newBrowser(t)
	a, b := startNode(t, "a"), startNode(t, "b")
	ca, cb := openConsole(t, browser, a), openConsole(t, browser, b)
	ca.setUp()
	cb.setUp()

	// Pair the nodes through the forms; b's name on a is HTML.
	ca.visit("/devices", "#add-device")
	ca.submit("adding b", map[string]string{"#device-id-input": b.ID, "#device-name": xssName, "#device-address": b.Listen}, "#add-device-submit", "#flash")
	if got := ca.text("#flash"); got != "Added device "+xssName+" as trusted." {
		t.Fatalf("adding b on a: %q", got)
	}
	cb.visit("/devices", "#add-device")
	cb.submit("adding a bad ID", map[string]string{"#device-id-input": "not-a-device-id"}, "#add-device-submit", "#flash")
	if got := cb.text("#flash"); !cb.flashIsError() || strings.HasPrefix(got, "Error") {
		t.Fatalf("adding a bad device ID: %q, not shown as an error", got)
	}
	cb.visit("/devices", "#add-device")
	cb.submit("adding a", map[string]string{"#device-id-input": a.ID, "#device-name": "node a", "#device-address": a.Listen}, "#add-device-submit", "#flash")
	ca.waitConnected(b.ID)
	cb.waitConnected(a.ID)
	if got := ca.text(`tr[data-device="` + b.ID + `"] .name`); got != xssName {
		t.Errorf("a shows b's name as %q, want the literal %q", got, xssName)
	}
	if n := ca.count("#devices img"); n != 0 {
		t.Errorf("a device name became %d img elements", n)
	}

	// Add and share the folder on both sides.
	dirA, dirB := filepath.Join(t.TempDir(), "docs-a"), filepath.Join(t.TempDir(), "docs-b")
	for _, x := range []struct {
		c        *console
		dir      string
		peer     *node
		peerName string
	}{{ca, dirA, b, xssName}, {cb, dirB, a, "node a"}} {
		if err := os.MkdirAll(x.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		x.c.visit("/folders", "#add-folder")
		x.c.submit("adding the folder", map[string]string{"#folder-id": "docs", "#folder-label": "Documents", "#folder-path": x.dir}, "#add-folder-submit", "#flash")
		if got := x.c.text("#flash"); got != "Added folder docs at "+x.dir+"." {
			t.Fatalf("adding the folder on %s: %q", x.c.n.name, got)
		}
		if get(x.c, "password field", chromedp.Evaluate[bool](`document.getElementById("share-password-label").hidden`)) != true {
			t.Errorf("%s: the password field shows for a trusted device", x.c.n.name)
		}
		x.c.visit("/folders", "#share-folder")
		x.c.submit("sharing the folder", map[string]string{"#share-folder-id": "docs", "#share-device": x.peer.ID}, "#share-submit", "#flash")
		if got := x.c.text("#flash"); got != "Shared folder docs with "+x.peerName+"." {
			t.Fatalf("sharing the folder on %s: %q", x.c.n.name, got)
		}
	}

	writeFile(t, filepath.Join(dirA, "hello.txt"), []byte("hello from a\n"), 0o644)
	writeFile(t, filepath.Join(dirA, xssName+".txt"), []byte("not a script\n"), 0o644)
	a.cli("scan", "docs")

	// b's folder page lists both files once they synced.
	files, listed := "", false
	defer func() {
		if !listed { // the wait failed: show what the page listed
			t.Logf("b's folder page shows:\n%s", files)
		}
	}()
	testutil.Eventually(t, converge, "b's folder page to list the synced files", func() bool {
		cb.visit("/folders/docs", "#files")
		files = cb.text("#files")
		listed = strings.Contains(files, "hello.txt") && strings.Contains(files, xssName+".txt")
		return listed
	})
	if got, err := os.ReadFile(filepath.Join(dirB, "hello.txt")); err != nil || string(got) != "hello from a\n" {
		t.Fatalf("hello.txt on b: %q, %v", got, err)
	}
	if n := cb.count("#files img"); n != 0 {
		t.Errorf("a file name became %d img elements", n)
	}
	names := get(cb, "file names", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#files td.name")).map(e => e.textContent)`))
	if strings.Join(names, "|") != xssName+".txt|hello.txt" {
		t.Errorf("b lists files %q", names)
	}

	// The dashboard shows the folder idle and shared with the connected peer.
	ca.visit("/", `tr[data-folder="docs"]`)
	testutil.Eventually(t, converge, "a's dashboard showing docs idle", func() bool {
		return strings.Contains(ca.text(`tr[data-folder="docs"]`), "idle")
	})
	if n := ca.count("img"); n != 1 { // the QR code only
		t.Errorf("a's dashboard has %d img elements, want only the QR code", n)
	}
	// b's pages name only "node a": they make the docs' screenshots.
	cb.visit("/", `tr[data-folder="docs"]`)
	cb.screenshot("dashboard")
	cb.visit("/devices", "#add-device")
	cb.screenshot("devices")
	cb.visit("/folders", "#folders")
	cb.screenshot("folders")
	// On a phone every page fits: nothing scrolls sideways, every
	// control is on screen.
	for _, width := range []int64{390, 1280} {
		cb.run("resizing", chromedp.EmulateViewport(width, 844, chromedp.EmulateMobile))
		for _, p := range []string{"/", "/devices", "/folders", "/folders/docs", "/folders/docs/versions?path=hello.txt", "/folders/docs/settings", "/devices/" + a.ID + "/trust", "/folders/docs/remove"} {
			cb.visit(p, "main")
			if bad := get(cb, "what does not fit", chromedp.Evaluate[[]string](overflowScript)); len(bad) > 0 {
				t.Errorf("at %d px %s does not fit:\n  %s", width, p, strings.Join(bad, "\n  "))
			}
		}
	}
	if n := ca.dialogs.Load() + cb.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}

// overflowScript lists what does not fit the page's width: the page
// itself when it scrolls sideways, and every control or link that
// reaches beyond the viewport.
const overflowScript = `(() => {
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

// TestConsoleNodeRestart: while the node is down its console page says
// so in a banner; once the node is back (a new process, which forgot the
// session) the page goes to the login page by itself, never showing the
// login page inside a panel.
func TestConsoleNodeRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	home := filepath.Join(t.TempDir(), "r")
	n := startNodeIn(t, "r", home, "--gui", addr)
	c := openConsole(t, newBrowser(t), n)
	c.setUp()
	c.visit("/", "#folders")
	waitPage(c, "the event stream", `document.body.dataset.live === "stream"`)
	get(c, "watching the panels", chromedp.Evaluate[bool](`(new MutationObserver(() => {
		if (document.querySelector("[data-refresh-on] form[action='/login'], [data-refresh-on] #login")) sessionStorage.setItem("sawLogin", "1");
	}).observe(document.body, {subtree: true, childList: true}), true)`))
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	waitPage(c, "the offline banner", `(e => !!e && !e.hidden && e.offsetHeight > 0)(document.getElementById("offline")) && document.body.dataset.live === "down"`)
	n = startNodeIn(t, "r", home, "--gui", addr)
	c.n = n
	waitPage(c, "the login page", `location.pathname === "/login" && !!document.getElementById("login")`)
	if get(c, "a login page in a panel", chromedp.Evaluate[bool](`sessionStorage.getItem("sawLogin") === "1"`)) {
		t.Error("a panel showed the login page")
	}
	c.submit("login", map[string]string{"#password": consolePassword}, "#login", "#device-id")
}

// waitPage waits until the script's expression is true on the page the
// tab shows, across navigations.
func waitPage(c *console, what, expr string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(c.ctx, time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("waiting for %s on %s: timed out\n%s", what, c.n.name, c.dump())
}

// TestConsoleVersions: on a node with versioning on, the console's versions
// page finds a file a peer changed twice, lists its old versions newest
// first, and its Restore button brings the oldest content back on disk.
func TestConsoleVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	browser := newBrowser(t)
	c := newCluster(t, 2)
	b := c.nodes[1]
	b.cli("folder", "versioning", "f", "--type", "simple")
	x := filepath.Join(c.dirs[0], "x.txt")
	for _, v := range []string{"one", "two", "three"} {
		writeFile(t, x, []byte(v), 0o644)
		waitContent(t, filepath.Join(c.dirs[1], "x.txt"), v)
	}
	writeFile(t, filepath.Join(c.dirs[0], "other.txt"), []byte("other"), 0o644)
	waitContent(t, filepath.Join(c.dirs[1], "other.txt"), "other")
	testutil.Eventually(t, converge, "b to keep two versions of x.txt", func() bool { return len(b.versions("f", "x.txt")) == 2 })

	cb := openConsole(t, browser, b)
	cb.setUp()
	cb.visit("/folders/f", "#versions-link")
	cb.submit("opening the versions page", nil, "#versions-link", "#version-search")
	if n := cb.count("#version-files a"); n != 2 {
		t.Fatalf("the versions page lists %d files, want 2:\n%s", n, cb.dump())
	}
	cb.submit("searching", map[string]string{"#version-q": "X.T"}, "#version-search-submit", "#version-files")
	names := get(cb, "file names", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#version-files a")).map(e => e.textContent)`))
	if strings.Join(names, "|") != "x.txt" {
		t.Fatalf("the search for X.T lists %q, want only x.txt", names)
	}
	// Followed by loading its address rather than a click: after a click
	// that navigates, a wait can match the old page's nodes and then lose
	// them ("Could not find node with given id").
	href := get(cb, "x.txt's link", chromedp.Evaluate[string](`document.querySelector("#version-files a").getAttribute("href")`))
	cb.visit(href, "#versions")
	if got := cb.text("#version-path"); got != "x.txt" {
		t.Fatalf("versions page for %q", got)
	}
	if n := cb.count("#versions a.restore"); n != 2 {
		t.Fatalf("%d Restore links, want 2 (one and two):\n%s", n, cb.dump())
	}
	sources := get(cb, "sources", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#versions td.source")).map(e => e.textContent)`))
	if strings.Join(sources, "|") != "this device|this device" {
		t.Errorf("sources %q, want this device twice", sources)
	}
	// The file as it is now ("three") is on top; no version is like it.
	if n := cb.count("#current-file"); n != 1 {
		t.Errorf("%d rows of the file as it is now", n)
	}
	if n := cb.count("#versions tr.is-current"); n != 0 {
		t.Errorf("%d versions marked as the current content", n)
	}
	hashes := get(cb, "hashes", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#versions code.hash")).map(e => e.textContent)`))
	if len(hashes) != 3 || hashes[0] == hashes[1] || hashes[1] == hashes[2] || len(hashes[0]) != 12 {
		t.Errorf("content hashes %q: want three different ones", hashes)
	}
	cb.screenshot("versions")
	// Download the oldest version ("one") through its link.
	dl := t.TempDir()
	if _, err := chromedp.CallBrowser(cb.ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dl}); err != nil {
		t.Fatalf("allowing downloads: %v", err)
	}
	cb.click("downloading the oldest version", "#versions tbody tr:last-child a.download")
	// Named after the version's time, as the archive names it.
	testutil.Eventually(t, 30*time.Second, "the download of x~TIME.txt", func() bool {
		names, _ := filepath.Glob(filepath.Join(dl, "x~2*-*.txt"))
		if len(names) != 1 {
			return false
		}
		b, err := os.ReadFile(names[0])
		return err == nil && string(b) == "one"
	})
	// The last row is the oldest version: "one". The restore asks first.
	cb.submit("asking to restore the oldest version", nil, "#versions tbody tr:last-child a.restore", "#confirm")
	if got := cb.text("#confirm-question"); !strings.HasPrefix(got, "Restore the version of x.txt from ") {
		t.Errorf("the restore asks %q", got)
	}
	if got, err := os.ReadFile(filepath.Join(c.dirs[1], "x.txt")); err != nil || string(got) != "three" {
		t.Fatalf("asking restored: %q, %v", got, err)
	}
	cb.submit("restoring the oldest version", nil, "#confirm", "#flash")
	if got := cb.text("#flash"); got != "Restored x.txt." {
		t.Fatalf("restore says %q", got)
	}
	waitContent(t, filepath.Join(c.dirs[1], "x.txt"), "one")
	waitContent(t, x, "one")
	// The replaced "three" is now a version too.
	if n := cb.count("#versions a.restore"); n != 3 {
		t.Errorf("after the restore, %d Restore links, want 3", n)
	}
	if n := cb.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}

// TestConsoleManage: the devices page checks an ID as it is typed,
// ignores a pending device and removes a known one after asking; a
// folder's label is edited and the folder removed after a confirm step
// that says its files stay, which they do.
func TestConsoleManage(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	browser := newBrowser(t)
	a, b := startNode(t, "a"), startNode(t, "b")
	ca := openConsole(t, browser, a)
	ca.setUp()

	ca.visit("/devices", "#add-device")
	check := func(id, want string) {
		t.Helper()
		get(ca, "clearing the ID", chromedp.Evaluate[bool](`(document.getElementById("device-id-input").value = "", true)`))
		ca.run("typing "+id, chromedp.SendKeys(chromedp.CSS("#device-id-input"), id))
		testutil.Eventually(t, 10*time.Second, "the ID check to say "+want, func() bool { return ca.text("#device-id-check") == want })
	}
	_, cutErr := crypt.ParseDeviceID(b.ID[:20])
	check(a.ID, "this is this device")
	check(b.ID[:20], cutErr.Error())
	check(b.ID, "valid device ID")

	// b knocks on a and shows as pending; b stops so it cannot knock
	// again, and a ignores it.
	b.cli("device", "add", a.ID, "--address", a.Listen)
	pending := `li[data-pending-device="` + b.ID + `"]`
	ca.run("waiting for b pending", chromedp.WaitVisible(chromedp.CSS(pending)))
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	ca.visit("/devices", pending)
	ca.submit("ignoring b", nil, pending+" button.ignore", "#flash")
	if got := ca.text("#flash"); got != "Ignored." {
		t.Fatalf("ignoring: %q", got)
	}
	if n := ca.count(pending); n != 0 {
		t.Errorf("b still listed pending")
	}
	var p struct {
		Devices []json.RawMessage `json:"devices"`
	}
	a.get("/rest/pending", &p)
	if len(p.Devices) != 0 {
		t.Errorf("pending after ignoring: %s", p.Devices)
	}

	// Another device knocks and is accepted, named and untrusted, from
	// the form; it then connects.
	r := startNode(t, "r")
	r.cli("device", "add", a.ID, "--address", a.Listen)
	pendingR := `li[data-pending-device="` + r.ID + `"]`
	ca.visit("/devices", pendingR)
	if !get(ca, "the trusted choice", chromedp.Evaluate[bool](`document.querySelector(`+strconv.Quote(pendingR+" input.accept-trusted")+`).checked`)) {
		t.Error("accepting does not start from trusted")
	}
	ca.run("choosing untrusted", chromedp.Click(chromedp.CSS(pendingR+" input.accept-untrusted")))
	ca.submit("accepting r", map[string]string{pendingR + " input.accept-name": "backup box"}, pendingR+" button.accept", "#flash")
	if got := ca.text("#flash"); got != "Accepted device backup box as untrusted." {
		t.Fatalf("accepting: %q", got)
	}
	var devs []web.DeviceStatus
	a.get("/rest/devices", &devs)
	found := false
	for _, d := range devs {
		if d.ID == r.ID {
			found = true
			if d.Name != "backup box" || !d.Untrusted {
				t.Errorf("accepted as %+v", d)
			}
		}
	}
	if !found {
		t.Fatalf("r is not a known device after accepting: %+v", devs)
	}
	ca.waitConnected(r.ID)

	// Remove a known device after the confirm step.
	a.cli("device", "add", b.ID, "--name", "old laptop")
	row := `tr[data-device="` + b.ID + `"]`
	ca.visit("/devices", row)
	ca.submit("asking to remove b", nil, row+" a.remove-device", "#confirm")
	if got := ca.text("#confirm-question"); !strings.Contains(got, "old laptop") {
		t.Errorf("confirm question %q", got)
	}
	ca.submit("removing b", nil, "#confirm", "#flash")
	if got := ca.text("#flash"); got != "Device removed." {
		t.Fatalf("removing: %q", got)
	}
	if n := ca.count(row); n != 0 {
		t.Errorf("b still listed after removal")
	}

	// Edit a folder's label, then remove the folder: its files stay.
	dir := filepath.Join(t.TempDir(), "docs")
	writeFile(t, filepath.Join(dir, "keep.txt"), []byte("keep me"), 0o644)
	a.cli("folder", "add", "docs", dir, "--label", "Docs")
	ca.visit("/folders/docs", "#edit-folder")
	ca.submit("renaming", map[string]string{"#edit-folder-label": "Documents " + xssName}, "#edit-folder-submit", "#flash")
	if got := ca.text("h1"); got != "Folder docs · Documents "+xssName {
		t.Errorf("title after the rename: %q", got)
	}
	ca.submit("asking to remove docs", nil, "#remove-folder", "#confirm")
	if got := ca.text("#confirm-note"); !strings.Contains(got, "never deletes files on disk") {
		t.Errorf("confirm note %q", got)
	}
	ca.submit("removing docs", nil, "#confirm", "#flash")
	if got := ca.text("#flash"); got != "Folder removed; its files stay on disk." {
		t.Fatalf("removing the folder: %q", got)
	}
	if n := ca.count(`tr[data-folder="docs"]`); n != 0 {
		t.Errorf("docs still listed")
	}
	if got, err := os.ReadFile(filepath.Join(dir, "keep.txt")); err != nil || string(got) != "keep me" {
		t.Errorf("the folder's file after removal: %q, %v", got, err)
	}
	if n := ca.count("img"); n != 0 {
		t.Errorf("%d img elements: a name became HTML", n)
	}
	if n := ca.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}

// TestConsoleSettingsReceiver: a trusted node's settings page sets
// versioning; the receiver's folder page shows what it stores and offers
// nothing that needs the password, and its settings page previews what a
// retention policy would drop.
func TestConsoleSettingsReceiver(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	browser := newBrowser(t)
	d, r := startNode(t, "d"), startNode(t, "r")
	dir := filepath.Join(t.TempDir(), "docs")
	writeFile(t, filepath.Join(dir, "x.txt"), []byte("first version"), 0o644)
	d.cli("folder", "add", "docs", dir)
	backUp(t, d, r, "docs", passwordFile(t, "receiver test password"))
	writeFile(t, filepath.Join(dir, "x.txt"), []byte("second version, longer"), 0o644)
	d.cli("scan", "docs")
	held := func() int64 {
		if f := r.encFolder("docs"); f.Receiver != nil {
			return f.Receiver.Records
		}
		return 0
	}
	testutil.Eventually(t, converge, "r to hold two versions of x.txt", func() bool { return held() >= 2 })

	cd := openConsole(t, browser, d)
	cd.setUp()
	cd.visit("/folders/docs/settings", "#versioning-form")
	cd.run("choosing simple", chromedp.SetValue(chromedp.CSS("#versioning-type"), "simple"))
	cd.submit("saving versioning", map[string]string{"#versioning-keep": "3"}, "#versioning-save", "#flash")
	if got := cd.text("#flash"); got != "Versioning saved." {
		t.Fatalf("saving versioning: %q", got)
	}
	if got := strings.TrimSpace(d.cli("folder", "versioning", "docs")); !strings.Contains(got, "simple") || !strings.Contains(got, "3") {
		t.Errorf("versioning after the form: %q", got)
	}
	cd.screenshot("settings")
	// On d the receiver's newest version of x.txt is the file as it is
	// now, the older one is not.
	testutil.Eventually(t, converge, "d's versions page to list r's two versions of x.txt", func() bool {
		cd.visit("/folders/docs/versions?path=x.txt", "#version-path")
		return cd.count("#versions tr.version") == 2
	})
	marks := get(cd, "the current marks", chromedp.Evaluate[[]bool](`Array.from(document.querySelectorAll("#versions tr.version")).map(e => e.classList.contains("is-current"))`))
	if len(marks) != 2 || !marks[0] || marks[1] {
		t.Errorf("r's versions of x.txt, newest first, marked current: %v, want [true false]\n%s", marks, cd.dump())
	}

	cr := openConsole(t, browser, r)
	cr.setUp()
	cr.visit("/folders/docs", "#receiver-figures")
	st := r.encFolder("docs").Receiver
	if got := cr.text("#chunks"); got != strconv.FormatInt(st.Chunks, 10) || st.Chunks == 0 {
		t.Errorf("the page shows %s chunks, the status %d", got, st.Chunks)
	}
	if got := cr.text("#stored-bytes"); got == "" || got == "0 B" {
		t.Errorf("stored bytes %q", got)
	}
	if got := cr.text("#dedup"); got == "" {
		t.Error("no dedup ratio")
	}
	if got := cr.text(`#receiver-devices tr[data-device="` + d.ID + `"] .last-stored`); !strings.HasSuffix(got, "ago") {
		t.Errorf("last stored from d: %q", got)
	}
	if n := cr.count("#versions-link, a[href$='/versions'], button.restore, a.download"); n != 0 {
		t.Errorf("the receiver offers %d version or restore controls", n)
	}
	cr.visit("/folders/docs/settings", "#retention-form")
	cr.submit("keeping the last version", map[string]string{`input[name="keepLast"]`: "1"}, "#retention-save", "#flash")
	if got := cr.text("#flash"); got != "Retention saved." {
		t.Fatalf("saving retention: %q", got)
	}
	cr.submit("previewing", nil, "#prune-preview", "#prune-preview-result")
	got := cr.text("#prune-preview-result")
	if !strings.HasPrefix(got, "A prune would drop 1 versions") || !strings.Contains(got, "1 versions kept") {
		t.Errorf("preview says %q", got)
	}
	// Values typed but not saved are what the preview tries.
	cr.submit("previewing keep last 5", map[string]string{`input[name="keepLast"]`: "5"}, "#prune-preview", "#prune-preview-result")
	if got := cr.text("#prune-preview-result"); !strings.HasPrefix(got, "A prune would drop nothing") || !strings.Contains(got, "not saved yet") {
		t.Errorf("preview of keep last 5 says %q", got)
	}
	if n := held(); n != st.Records {
		t.Errorf("the preview dropped versions: %d, was %d", n, st.Records)
	}
	// Prune now asks first and says what goes.
	cr.visit("/folders/docs/settings", "#prune-now")
	cr.submit("asking to prune", nil, "#prune-now", "#confirm")
	if got := cr.text("#confirm-note"); !strings.HasPrefix(got, "It drops 1 versions") {
		t.Errorf("the prune's confirm page says %q", got)
	}
	if n := held(); n != st.Records {
		t.Errorf("asking dropped versions: %d, was %d", n, st.Records)
	}
}

// TestConsoleHTTPS: beyond loopback the console needs its password set
// first, then serves HTTPS with the home's certificate, whose fingerprint
// it logs; the pinned client reaches it and the browser logs in.
func TestConsoleHTTPS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	home := filepath.Join(t.TempDir(), "h")
	r := run(t, home, "serve", "--listen", "tcp://127.0.0.1:0", "--no-local-discovery", "--gui", "0.0.0.0:0")
	if r.code == 0 || !strings.Contains(r.stderr, "set it first") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("serve beyond loopback without a password: exit %d, stderr %q", r.code, r.stderr)
	}

	n := startNodeIn(t, "h", home)
	plain := newBrowser(t)
	openConsole(t, plain, n).setUp()
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	n = startNodeIn(t, "h", home, "--gui", "0.0.0.0:0")
	if !strings.HasPrefix(n.GUI, "https://127.0.0.1:") {
		t.Fatalf("serve.json gui %q, want https://127.0.0.1:PORT", n.GUI)
	}
	fp, err := web.CertFingerprint(home)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(n.log.String(), fp) {
		t.Errorf("the log does not name the fingerprint %s", fp)
	}
	cl, err := web.NewClient(home, n.GUI, n.apiKey)
	if err != nil {
		t.Fatal(err)
	}
	var st web.Status
	if err := cl.Do(context.Background(), "GET", "/rest/status", nil, &st); err != nil || st.DeviceID != n.ID {
		t.Fatalf("pinned client: %+v, %v", st.DeviceID, err)
	}
	if _, err := httpGet(n.GUI+"/healthz", ""); err == nil {
		t.Error("an unpinned client trusted the self-signed certificate")
	}
	// The CLI pins the certificate in the home the same way.
	if out := n.cli("status", "--json"); !strings.Contains(out, n.ID) {
		t.Errorf("status over https: %s", out)
	}

	// Only this browser accepts the self-signed certificate.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("ignore-certificate-errors", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	c := openConsole(t, bctx, n)
	c.visit("/", "#login")
	c.submit("login over https", map[string]string{"#password": consolePassword}, "#login", "#device-id")
	if got := c.text("#device-id"); got != n.ID {
		t.Errorf("dashboard over https shows %q", got)
	}
	if loc := get(c, "location", chromedp.Location()); !strings.HasPrefix(loc, "https://") {
		t.Errorf("console at %s", loc)
	}
}
