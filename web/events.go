package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/sync/events"
)

// GET /rest/events streams the node's events as server-sent events: each
// as "id: ID", "event: TYPE" and "data: " the event's JSON, flushed as it
// is published.

const (
	// defaultKeepAlive is how long a quiet stream waits before it sends a
	// comment, so that proxies and the browser keep the connection.
	defaultKeepAlive = 15 * time.Second
	// streamWriteTimeout drops a client that has not taken a write within
	// this long: a stuck reader must not hold the handler forever.
	streamWriteTimeout = 30 * time.Second
	// streamRetry is how long a browser waits before it reconnects.
	streamRetry = 2 * time.Second
	// resyncEvent is the stream's own event, sent when the reader's next
	// event is no longer held: whatever it keeps is stale, reload it.
	resyncEvent = "Resync"
)

// resync is the data of a Resync event.
type resync struct {
	// After is the ID the reader asked to go on from.
	After int64 `json:"after"`
}

// getEvents streams events after the reader's ID — its Last-Event-ID
// header (a browser reconnecting), else ?since=ID (0: every event held),
// else now — of the ?types=A,B asked for (all by default). It ends when
// the client goes or the server shuts down.
func (s *Server) getEvents(c echo.Context) error {
	bus := s.cfg.Events
	if bus == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "this node publishes no events")
	}
	after, err := streamCursor(c.Request(), bus)
	if err != nil {
		return badRequest(err.Error())
	}
	wanted, err := parseTypes(c.QueryParam("types"))
	if err != nil {
		return badRequest(err.Error())
	}
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	// Shutdown waits for requests to end; a stream ends when it starts.
	defer context.AfterFunc(s.streamsCtx, cancel)()
	s.streams.Add(1)
	defer s.streams.Add(-1)

	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	out := &sseWriter{w: w, rc: http.NewResponseController(w)}
	keepAlive := s.keepAlive
	if keepAlive == 0 {
		keepAlive = defaultKeepAlive
	}
	// The retry line also shows the client the stream is open at once.
	out.printf("retry: %d\n\n", streamRetry.Milliseconds())
	for out.err == nil {
		evs, err := bus.Since(after)
		if errors.Is(err, events.ErrFellBehind) {
			latest := bus.Latest()
			out.event(latest, resyncEvent, struct {
				ID   int64     `json:"id"`
				Time time.Time `json:"time"`
				Type string    `json:"type"`
				Data resync    `json:"data"`
			}{latest, time.Now(), resyncEvent, resync{After: after}})
			after = latest
		} else if err != nil {
			return err
		}
		for _, e := range evs {
			if wanted == nil || wanted[e.Type] {
				out.event(e.ID, string(e.Type), e)
			}
			after = e.ID
		}
		if out.err != nil {
			break
		}
		wctx, stop := context.WithTimeout(ctx, keepAlive)
		err = bus.Wait(wctx, after)
		stop()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			out.printf(": keep-alive\n\n")
		}
	}
	// The client went: nobody reads an error now.
	s.cfg.Logger.Debug("event stream ended", "err", out.err)
	return nil
}

// streamCursor returns the ID after which a stream starts.
func streamCursor(r *http.Request, bus *events.Bus) (int64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 0 {
			return 0, fmt.Errorf("Last-Event-ID %q is not an event ID", v)
		}
		return id, nil
	}
	if v := r.URL.Query().Get("since"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 0 {
			return 0, fmt.Errorf("since=%q is not an event ID", v)
		}
		return id, nil
	}
	return bus.Latest(), nil
}

// parseTypes reads the types filter: nil for all.
func parseTypes(v string) (map[events.Type]bool, error) {
	if v == "" {
		return nil, nil
	}
	known := events.Types()
	wanted := map[events.Type]bool{}
	for name := range strings.SplitSeq(v, ",") {
		t := events.Type(strings.TrimSpace(name))
		if !slices.Contains(known, t) {
			return nil, fmt.Errorf("no event type %q", t)
		}
		wanted[t] = true
	}
	return wanted, nil
}

// sseWriter writes a stream's frames, each flushed and under a write
// deadline; the first error sticks and ends the stream.
type sseWriter struct {
	w   io.Writer
	rc  *http.ResponseController
	err error
}

func (o *sseWriter) printf(format string, args ...any) {
	if o.err != nil {
		return
	}
	if err := o.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		o.err = err
		return
	}
	_, o.err = fmt.Fprintf(o.w, format, args...)
	if o.err == nil {
		o.err = o.rc.Flush()
	}
}

// event writes one event; v is its JSON, on one line.
func (o *sseWriter) event(id int64, typ string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		o.err = err
		return
	}
	o.printf("id: %d\nevent: %s\ndata: %s\n\n", id, typ, b)
}
