package web

import (
	"context"
	"io"
	"net/http"
	"os"
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
