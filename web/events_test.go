package web

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/events"
	"lockstep/test/testutil"
)

// waitTimeout bounds every wait for a frame or a state in these tests.
const waitTimeout = 10 * time.Second

// liveServer is a Server answering on its own loopback listener through
// Serve, as a node runs it.
type liveServer struct {
	*Server
	base string
	db   *db.DB
	// stop cancels Serve's context; done has what Serve returned.
	stop context.CancelFunc
	done chan error
}

// startServer serves a Server with bus (nil for none) and eng until the
// test ends; adjust, when not nil, changes the Server before it serves.
func startServer(t *testing.T, bus *events.Bus, eng Engine, adjust func(*Server)) *liveServer {
	t.Helper()
	database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close() })
	var id crypt.DeviceID
	id[0] = 7
	s, err := New(context.Background(), "127.0.0.1:0", Config{ID: id, DB: database, Conns: fakeConns{}, Engine: eng, Backup: backupOf(eng), Events: bus, APIKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if adjust != nil {
		adjust(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ls := &liveServer{Server: s, base: s.URL(), db: database, stop: cancel, done: make(chan error, 1)}
	go func() { ls.done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ls.done; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ls
}

// frame is one server-sent event, or a comment (only comment set).
// unknown holds a line that is none of these.
type frame struct {
	id, event, data, comment, unknown string
	retry                             bool
}

// stream is a client's open GET /rest/events.
type stream struct {
	t      *testing.T
	resp   *http.Response
	frames chan frame
	cancel context.CancelFunc
}

// openStream GETs /rest/events?query with the API key (and the headers
// given as name, value, ...) and fails the test unless it answers 200.
func openStream(t *testing.T, ls *liveServer, query string, headers ...string) *stream {
	t.Helper()
	resp, cancel := getStream(t, ls, query, append([]string{"X-API-Key", testKey}, headers...)...)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /rest/events?%s: %s %s", query, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	st := &stream{t: t, resp: resp, frames: make(chan frame, 100), cancel: cancel}
	go st.read()
	t.Cleanup(st.close)
	return st
}

// getStream sends the request; the caller closes the response with the
// returned cancel.
func getStream(t *testing.T, ls *liveServer, query string, headers ...string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", ls.base+"/rest/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return resp, func() { cancel(); resp.Body.Close() }
}

// read parses frames until the body ends, then closes st.frames.
func (st *stream) read() {
	defer close(st.frames)
	r := bufio.NewReader(st.resp.Body)
	var f frame
	empty := true
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if !empty {
				st.frames <- f
			}
			f, empty = frame{}, true
			continue
		case strings.HasPrefix(line, ":"):
			f.comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			f.id = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			f.event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			f.data = line[len("data: "):]
		case strings.HasPrefix(line, "retry: "):
			f.retry = true
		default:
			f.unknown = line
		}
		empty = false
	}
}

func (st *stream) close() { st.cancel() }

// next returns the next event, skipping comments and the retry line.
func (st *stream) next() frame {
	st.t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case f, ok := <-st.frames:
			if !ok {
				st.t.Fatal("the stream ended")
			}
			if f.unknown != "" {
				st.t.Fatalf("unexpected line %q in the stream", f.unknown)
			}
			if f.event != "" {
				return f
			}
		case <-timeout:
			st.t.Fatal("no event within the wait")
		}
	}
}

// event returns the next event decoded, checking its frame's id and type
// match its JSON.
func (st *stream) event() events.Event {
	st.t.Helper()
	f := st.next()
	var e events.Event
	if err := json.Unmarshal([]byte(f.data), &e); err != nil {
		st.t.Fatalf("event data %q: %v", f.data, err)
	}
	if f.id != strconv.FormatInt(e.ID, 10) || f.event != string(e.Type) {
		st.t.Fatalf("frame id %q event %q carries an event %d of type %s", f.id, f.event, e.ID, e.Type)
	}
	return e
}

// waitOpen waits until the server counts n open streams.
func waitOpen(t *testing.T, ls *liveServer, n int64) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "open streams to be "+strconv.FormatInt(n, 10), func() bool { return ls.streams.Load() == n })
}

func TestEventsStream(t *testing.T) {
	bus := events.NewBus(0)
	bus.Publish(events.FolderSummary{Folder: "before"})
	ls := startServer(t, bus, fakeEngine{}, nil)
	st := openStream(t, ls, "")
	waitOpen(t, ls, 1)
	want := events.FolderStateChanged{Folder: "docs", From: events.StateIdle, State: events.StateError, Error: "folder path missing"}
	bus.Publish(want)
	e := st.event()
	if e.ID != bus.Latest() || e.Data != want || e.Time.IsZero() {
		t.Fatalf("got %+v, want event %d with %+v (and not the one before the stream)", e, bus.Latest(), want)
	}
	bus.Publish(events.DeviceConnected{Device: "D1", Address: "tcp://127.0.0.1:1", Connection: "lan"})
	if e := st.event(); e.Type != events.TypeDeviceConnected || e.Data.(events.DeviceConnected).Device != "D1" {
		t.Fatalf("got %+v, want D1's DeviceConnected", e)
	}
}

// TestEventsSession: a logged-in console session opens the stream too.
func TestEventsSession(t *testing.T) {
	bus := events.NewBus(0)
	ls := startServer(t, bus, fakeEngine{}, nil)
	c := setUp(t, ls.base)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ls.base+"/rest/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a session's stream: %s", resp.Status)
	}
	waitOpen(t, ls, 1)
	bus.Publish(events.PendingChanged{Device: "D2"})
	st := &stream{t: t, resp: resp, frames: make(chan frame, 10), cancel: cancel}
	go st.read()
	if e := st.event(); e.Data != (events.PendingChanged{Device: "D2"}) {
		t.Fatalf("got %+v", e)
	}
}

func TestEventsRefused(t *testing.T) {
	ls := startServer(t, events.NewBus(0), fakeEngine{}, nil)
	for _, c := range []struct {
		query   string
		headers []string
		code    int
	}{
		{"", nil, http.StatusUnauthorized},
		{"", []string{"X-API-Key", testKey + "x"}, http.StatusUnauthorized},
		{"since=x", []string{"X-API-Key", testKey}, http.StatusBadRequest},
		{"since=-1", []string{"X-API-Key", testKey}, http.StatusBadRequest},
		{"", []string{"X-API-Key", testKey, "Last-Event-ID", "x"}, http.StatusBadRequest},
		{"types=FolderSummary,NoSuchType", []string{"X-API-Key", testKey}, http.StatusBadRequest},
	} {
		resp, cancel := getStream(t, ls, c.query, c.headers...)
		var body Error
		json.NewDecoder(resp.Body).Decode(&body)
		cancel()
		if resp.StatusCode != c.code || body.Error == "" {
			t.Errorf("GET /rest/events?%s with %q: %s %+v, want %d with an error", c.query, c.headers, resp.Status, body, c.code)
		}
	}
	if n := ls.streams.Load(); n != 0 {
		t.Errorf("%d streams open after refusals", n)
	}
	// A node without a bus says so.
	none := startServer(t, nil, fakeEngine{}, nil)
	resp, cancel := getStream(t, none, "", "X-API-Key", testKey)
	cancel()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /rest/events without a bus: %s, want 503", resp.Status)
	}
}

// TestEventsReplay: a stream starts after ?since, or after Last-Event-ID
// when both are sent (a browser reconnecting to the URL it first opened).
func TestEventsReplay(t *testing.T) {
	bus := events.NewBus(0)
	ls := startServer(t, bus, fakeEngine{}, nil)
	start := bus.Latest()
	for _, f := range []string{"a", "b", "c"} {
		bus.Publish(events.FolderSummary{Folder: f})
	}
	folders := func(st *stream, n int) string {
		var got []string
		for range n {
			got = append(got, st.event().Data.(events.FolderSummary).Folder)
		}
		return strings.Join(got, ",")
	}
	for _, c := range []struct {
		query   string
		headers []string
		want    string
	}{
		{"since=" + strconv.FormatInt(start+1, 10), nil, "b,c"},
		{"since=0", nil, "a,b,c"},
		{"since=" + strconv.FormatInt(start, 10), []string{"Last-Event-ID", strconv.FormatInt(start+2, 10)}, "c"},
	} {
		st := openStream(t, ls, c.query, c.headers...)
		if got := folders(st, strings.Count(c.want, ",")+1); got != c.want {
			t.Errorf("?%s %q replays %s, want %s", c.query, c.headers, got, c.want)
		}
		st.close()
	}
	// A stream from the latest goes on with what is published next.
	st := openStream(t, ls, "since="+strconv.FormatInt(start+3, 10))
	bus.Publish(events.FolderSummary{Folder: "d"})
	if got := folders(st, 1); got != "d" {
		t.Errorf("after the replay: %s, want d", got)
	}
}

func TestEventsFilter(t *testing.T) {
	bus := events.NewBus(0)
	ls := startServer(t, bus, fakeEngine{}, nil)
	st := openStream(t, ls, "types=DeviceDisconnected,%20FolderError")
	waitOpen(t, ls, 1)
	bus.Publish(events.FolderSummary{Folder: "docs"})
	bus.Publish(events.DeviceConnected{Device: "D1"})
	bus.Publish(events.DeviceDisconnected{Device: "D1", Reason: "EOF"})
	bus.Publish(events.ItemStarted{Folder: "docs", Name: "x"})
	bus.Publish(events.FolderError{Folder: "docs", Error: "disk full"})
	if e := st.event(); e.Type != events.TypeDeviceDisconnected {
		t.Fatalf("first event %s, want DeviceDisconnected", e.Type)
	}
	if e := st.event(); e.Type != events.TypeFolderError || e.ID != bus.Latest() {
		t.Fatalf("second event %s %d, want FolderError %d", e.Type, e.ID, bus.Latest())
	}
}

// TestEventsResync: a reader whose next event the ring has dropped gets a
// Resync event, then what is published next.
func TestEventsResync(t *testing.T) {
	bus := events.NewBus(2)
	ls := startServer(t, bus, fakeEngine{}, nil)
	start := bus.Latest()
	for range 5 {
		bus.Publish(events.FolderSummary{Folder: "docs"})
	}
	for _, query := range []string{"since=" + strconv.FormatInt(start, 10), "since=" + strconv.FormatInt(bus.Latest()+10, 10)} {
		st := openStream(t, ls, query)
		f := st.next()
		var r struct {
			ID   int64  `json:"id"`
			Type string `json:"type"`
			Data struct {
				After int64 `json:"after"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(f.data), &r); err != nil {
			t.Fatal(err)
		}
		if f.event != "Resync" || f.id != strconv.FormatInt(bus.Latest(), 10) || r.ID != bus.Latest() || r.Type != "Resync" || "since="+strconv.FormatInt(r.Data.After, 10) != query {
			t.Fatalf("?%s: first frame %+v, want a Resync with id %d saying after %s", query, f, bus.Latest(), query)
		}
		bus.Publish(events.FolderSummary{Folder: "next"})
		if e := st.event(); e.ID != bus.Latest() {
			t.Fatalf("after the Resync: event %d, want %d", e.ID, bus.Latest())
		}
		st.close()
	}
}

func TestEventsKeepAlive(t *testing.T) {
	ls := startServer(t, events.NewBus(0), fakeEngine{}, func(s *Server) { s.keepAlive = 20 * time.Millisecond })
	st := openStream(t, ls, "")
	timeout := time.After(waitTimeout)
	for {
		select {
		case f := <-st.frames:
			if f.comment == "keep-alive" {
				return
			}
		case <-timeout:
			t.Fatal("no keep-alive comment")
		}
	}
}

// TestEventsClientGone: a client that goes frees its stream.
func TestEventsClientGone(t *testing.T) {
	ls := startServer(t, events.NewBus(0), fakeEngine{}, nil)
	a := openStream(t, ls, "")
	openStream(t, ls, "")
	waitOpen(t, ls, 2)
	a.close()
	waitOpen(t, ls, 1)
}

// TestEventsEndAtShutdown: stopping the server ends open streams at once,
// rather than after the shutdown's grace.
func TestEventsEndAtShutdown(t *testing.T) {
	ls := startServer(t, events.NewBus(0), fakeEngine{}, func(s *Server) { s.grace = time.Hour })
	st := openStream(t, ls, "")
	waitOpen(t, ls, 1)
	ls.stop()
	select {
	case err := <-ls.done:
		ls.done <- err // for the cleanup's check
	case <-time.After(waitTimeout):
		t.Fatal("Serve still waits for the open stream")
	}
	ended := make(chan struct{})
	go func() {
		for range st.frames {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(waitTimeout):
		t.Fatal("the client's stream did not end")
	}
	if n := ls.streams.Load(); n != 0 {
		t.Errorf("%d streams open after shutdown", n)
	}
}
