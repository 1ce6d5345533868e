package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/labstack/echo/v4"

	"lockstep/storage/db"
	"lockstep/sync/engine"
	"lockstep/sync/events"
)

// stateEngine reports the folder "docs" in the state it is set to.
type stateEngine struct {
	Engine
	state atomic.Pointer[string]
}

func newStateEngine(state string) *stateEngine {
	e := &stateEngine{}
	e.state.Store(&state)
	return e
}

func (e *stateEngine) set(state string) { e.state.Store(&state) }

func (e *stateEngine) FolderStatus(id string) (engine.FolderStatus, bool) {
	if id != "docs" {
		return engine.FolderStatus{}, false
	}
	return engine.FolderStatus{State: *e.state.Load()}, true
}

func (e *stateEngine) Reload(context.Context) error { return nil }

// chromiumPath returns the Chromium binary for the browser tests: the one
// named by $LOCKSTEP_CHROMIUM, else the Debian package's. Without one the
// test is skipped, or fails under CI=true.
func chromiumPath(t *testing.T) string {
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

// consoleTab opens a headless Chromium tab logged in to ls's console.
func consoleTab(t *testing.T, ls *liveServer) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	tab, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	// The first action starts the browser, which lives as long as the
	// context of that action: tab's, not a timeout's.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	hash, err := hashPassword(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.db.SetSetting(context.Background(), passwordSetting, hash); err != nil {
		t.Fatal(err)
	}
	httpOnly := true
	sid := ls.sessions.create()
	ctx, cancelCtx := context.WithTimeout(tab, waitTimeout)
	defer cancelCtx()
	if _, err := chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{Name: ls.cookie(sessionCookie), Value: sid, URL: ls.base, HTTPOnly: &httpOnly}); err != nil {
		t.Fatalf("setting the session cookie: %v", err)
	}
	return tab
}

// waitJS waits until the script's expression is true on the page.
func waitJS(t *testing.T, tab context.Context, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, waitTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		html, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
		t.Fatalf("waiting for %s: %v\n%s", what, err, html)
	}
}

// docsState is a script that is true when the folders panel shows docs in
// state.
func docsState(state string) string {
	return `(e => !!e && e.textContent === ` + strconv.Quote(state) + `)(document.querySelector('tr[data-folder="docs"] .state'))`
}

// openDashboard loads the dashboard in tab.
func openDashboard(t *testing.T, tab context.Context, ls *liveServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(ls.base+"/"), chromedp.WaitVisible(chromedp.CSS("#folders"))); err != nil {
		t.Fatalf("opening the dashboard: %v", err)
	}
}

func addDocs(t *testing.T, ls *liveServer) {
	t.Helper()
	if err := ls.db.PutFolder(context.Background(), db.Folder{ID: "docs", Path: "/data/docs", Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleFollowsEvents: the dashboard's folders panel shows a folder's
// new state once its FolderStateChanged event is published. The fallback
// poll is an hour away, so the refresh can only come from the event.
func TestConsoleFollowsEvents(t *testing.T) {
	bus := events.NewBus(0)
	eng := newStateEngine(events.StateIdle)
	ls := startServer(t, bus, eng, func(s *Server) { s.fallbackPoll = time.Hour })
	addDocs(t, ls)
	tab := consoleTab(t, ls)
	openDashboard(t, tab, ls)
	waitJS(t, tab, "docs idle", docsState("idle"))
	waitJS(t, tab, "the event stream to open", `document.body.dataset.live === "stream"`)

	eng.set(events.StateSyncing)
	bus.Publish(events.FolderStateChanged{Folder: "docs", From: events.StateIdle, State: events.StateSyncing})
	waitJS(t, tab, "docs syncing after its event", docsState("syncing"))

	// A reader that fell behind reloads every panel.
	eng.set(events.StateScanning)
	ls.stopStreams() // the stream ends; the browser comes back with its last ID
	for range events.DefaultSize + 1 {
		bus.Publish(events.ItemStarted{Folder: "docs", Name: "x"})
	}
	waitJS(t, tab, "docs scanning after a Resync", docsState("scanning"))
}

// TestConsolePollsWithoutStream: while the event stream is refused the
// panels are polled, and the stream is opened again once it answers.
func TestConsolePollsWithoutStream(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	eng := newStateEngine(events.StateIdle)
	ls := startServer(t, events.NewBus(0), eng, func(s *Server) {
		s.fallbackPoll = 50 * time.Millisecond
		s.echo.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				if refuse.Load() && strings.HasPrefix(c.Request().URL.Path, "/rest/events") {
					return echo.NewHTTPError(http.StatusServiceUnavailable, "refused by the test")
				}
				return next(c)
			}
		})
	})
	addDocs(t, ls)
	tab := consoleTab(t, ls)
	openDashboard(t, tab, ls)
	waitJS(t, tab, "docs idle", docsState("idle"))
	eng.set(events.StateSyncing)
	waitJS(t, tab, "docs syncing by a poll", docsState("syncing"))
	if live, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.dataset.live`)); live != "poll" {
		t.Errorf("the page says it follows the node by %q, want poll", live)
	}
	refuse.Store(false)
	waitJS(t, tab, "the event stream to open", `document.body.dataset.live === "stream"`)
}

// TestConsolePollsNodeWithoutEvents: on a node that publishes no events
// the panels are polled every noStreamPoll, as before there were events.
func TestConsolePollsNodeWithoutEvents(t *testing.T) {
	eng := newStateEngine(events.StateIdle)
	ls := startServer(t, nil, eng, nil)
	addDocs(t, ls)
	tab := consoleTab(t, ls)
	openDashboard(t, tab, ls)
	waitJS(t, tab, "docs idle", docsState("idle"))
	eng.set(events.StateSyncing)
	waitJS(t, tab, "docs syncing by a poll", docsState("syncing"))
	if live, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.dataset.poll + " " + document.body.dataset.live + " " + (document.body.dataset.events === undefined)`)); live != strconv.FormatInt(noStreamPoll.Milliseconds(), 10)+" poll true" {
		t.Errorf("the page's poll, mode and stream: %q", live)
	}
}

var refreshOn = regexp.MustCompile(`data-refresh-on="([^"]*)"`)

// TestPagesFollowEvents: the pages with live panels name the stream from
// the latest event, and only event types there are; a node without a bus
// has them polled.
func TestPagesFollowEvents(t *testing.T) {
	bus := events.NewBus(0)
	bus.Publish(events.FolderSummary{Folder: "docs"})
	ls := startServer(t, bus, fakeEngine{}, nil)
	c := setUp(t, ls.base)
	for _, p := range []string{"/", "/devices", "/folders"} {
		body := getPage(t, c, ls.base+p)
		want := `data-poll="10000" data-events="/rest/events" data-events-since="` + strconv.FormatInt(bus.Latest(), 10) + `"`
		if !strings.Contains(body, want) {
			t.Errorf("GET %s lacks %s", p, want)
		}
		panels := refreshOn.FindAllStringSubmatch(body, -1)
		if len(panels) == 0 {
			t.Errorf("GET %s has no live panel", p)
		}
		for _, m := range panels {
			for _, typ := range strings.Fields(m[1]) {
				if !slices.Contains(events.Types(), events.Type(typ)) {
					t.Errorf("GET %s: a panel follows %q, no event type", p, typ)
				}
			}
		}
	}
	none := startServer(t, nil, fakeEngine{}, nil)
	body := getPage(t, setUp(t, none.base), none.base+"/")
	if !strings.Contains(body, `<body data-poll="2000">`) {
		t.Errorf("a node without events: the dashboard's body is not polled every 2 s:\n%s", body)
	}
}

// getPage GETs u with c and returns the body of its 200 answer.
func getPage(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	return string(b)
}

// node is a console server that a test stops and starts again on the same
// address, over the same database.
type node struct {
	t    *testing.T
	db   *db.DB
	addr string
	*liveServer
}

// startAgain serves a new Server on n's address (the first time, on a
// port of its own); keep, when set, is the old server's sessions: a node
// that came back without losing them.
func (n *node) startAgain(bus *events.Bus, eng Engine, keep *sessions) {
	t := n.t
	t.Helper()
	var id [32]byte
	id[0] = 7
	addr := n.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s, err := New(context.Background(), addr, Config{ID: id, DB: n.db, Conns: fakeConns{}, Engine: eng, Backup: backupOf(eng), Events: bus, APIKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.fallbackPoll = time.Hour
	s.grace = 100 * time.Millisecond
	if keep != nil {
		s.sessions = keep
	}
	n.addr = s.ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	n.liveServer = &liveServer{Server: s, base: s.URL(), db: n.db, stop: cancel, done: make(chan error, 1)}
	go func(ls *liveServer) { ls.done <- s.Serve(ctx) }(n.liveServer)
}

// halt stops the node's server and waits until it has.
func (n *node) halt() {
	n.t.Helper()
	if n.liveServer == nil {
		return
	}
	n.stop()
	if err := <-n.done; err != nil {
		n.t.Errorf("Serve returned %v", err)
	}
	n.liveServer = nil
}

func newNode(t *testing.T, bus *events.Bus, eng Engine) *node {
	t.Helper()
	database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close() })
	n := &node{t: t, db: database}
	n.startAgain(bus, eng, nil)
	t.Cleanup(n.halt)
	return n
}

// waitPage is waitJS across navigations: until expr is true on the page
// the tab shows, whichever it is.
func waitPage(t *testing.T, tab context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(tab, time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	html, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	t.Fatalf("waiting for %s: timed out\n%s", what, html)
}

// location is the path of the tab's page.
func location(t *testing.T, tab context.Context) string {
	t.Helper()
	loc, err := chromedp.Run(tab, chromedp.Evaluate[string](`location.pathname`))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// noLoginInPanels is a script that is true while no panel holds a login
// or setup form.
const noLoginInPanels = `!document.querySelector("[data-refresh-on] form[action='/login'], [data-refresh-on] form[action='/setup'], [data-refresh-on] #login")`

// TestConsoleSessionEnds: a page whose session ends (the node forgot it)
// goes to the login page at its next refresh, by an event or by a poll,
// and never shows the login page inside a panel.
func TestConsoleSessionEnds(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			bus := events.NewBus(0)
			eng := newStateEngine(events.StateIdle)
			ls := startServer(t, bus, eng, func(s *Server) {
				s.fallbackPoll = time.Hour
				if !stream {
					s.cfg.Events = nil
				}
			})
			addDocs(t, ls)
			tab := consoleTab(t, ls)
			openDashboard(t, tab, ls)
			waitJS(t, tab, "docs idle", docsState("idle"))
			if stream {
				waitJS(t, tab, "the event stream to open", `document.body.dataset.live === "stream"`)
			}
			// sessionStorage outlives the page, which goes.
			if _, err := chromedp.Run(tab, chromedp.Evaluate[bool](`(new MutationObserver(() => { if (!(`+noLoginInPanels+`)) sessionStorage.setItem("sawLogin", "1"); }).observe(document.body, {subtree: true, childList: true}), true)`)); err != nil {
				t.Fatal(err)
			}
			ls.sessions.removeAll()
			bus.Publish(events.FolderStateChanged{Folder: "docs", From: events.StateIdle, State: events.StateSyncing})
			waitPage(t, tab, "the login page", `location.pathname === "/login" && !!document.getElementById("login")`)
			if saw, _ := chromedp.Run(tab, chromedp.Evaluate[bool](`sessionStorage.getItem("sawLogin") === "1"`)); saw {
				t.Error("a panel showed the login page")
			}
		})
	}
}

// TestConsoleNodeGone: while the node does not answer the page says so in
// a banner and stops claiming to be live; when the node is back it hides
// the banner and refreshes its panels by itself; a node that came back
// without the session (it restarted) sends the page to the login page.
func TestConsoleNodeGone(t *testing.T) {
	bus := events.NewBus(0)
	eng := newStateEngine(events.StateIdle)
	n := newNode(t, bus, eng)
	addDocs(t, n.liveServer)
	tab := consoleTab(t, n.liveServer)
	openDashboard(t, tab, n.liveServer)
	waitJS(t, tab, "docs idle", docsState("idle"))
	waitJS(t, tab, "the event stream to open", `document.body.dataset.live === "stream"`)
	banner := `(e => !!e && !e.hidden && e.offsetHeight > 0)(document.getElementById("offline"))`
	if shown, _ := chromedp.Run(tab, chromedp.Evaluate[bool](banner)); shown {
		t.Fatal("the offline banner shows while the node answers")
	}

	// Gone, then back with the session: the banner goes, the panels show
	// what changed meanwhile.
	keep := n.sessions
	n.halt()
	waitJS(t, tab, "the offline banner", banner+` && document.body.dataset.live === "down" && document.body.classList.contains("stale")`)
	eng.set(events.StateSyncing)
	n.startAgain(bus, eng, keep)
	waitJS(t, tab, "the banner to go and docs syncing", `!(`+banner+`) && document.body.dataset.live === "stream" && `+docsState("syncing"))
	if loc := location(t, tab); loc != "/" {
		t.Errorf("the page moved to %s", loc)
	}

	// Restarted: the session is gone with the old process.
	n.halt()
	waitJS(t, tab, "the offline banner", banner)
	n.startAgain(bus, eng, nil)
	waitPage(t, tab, "the login page", `location.pathname === "/login" && !!document.getElementById("login")`)
}
