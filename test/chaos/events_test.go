//go:build linux

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// eventWatch reads a node's event stream (GET /rest/events) while a
// scenario runs and keeps the events it names.
type eventWatch struct {
	mu     sync.Mutex
	events []event
	err    string // why the stream could not be read, if it could not

	cancel context.CancelFunc
	done   chan struct{}
}

// event is one server-sent event's data.
type event struct {
	Type string `json:"type"`
	Data struct {
		Folder       string `json:"folder"`
		Name         string `json:"name"`
		ConflictName string `json:"conflictName"`
		Device       string `json:"device"`
		Error        string `json:"error"`
		State        string `json:"state"`
	} `json:"data"`
}

// watchEvents follows n's events of the given types until the test ends.
func watchEvents(t testing.TB, n *node, types ...string) *eventWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &eventWatch{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(w.stop)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.GUI+"/rest/events?types="+strings.Join(types, ","), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", n.apiKey)
	// Not the shared client: its timeout would end the stream.
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		if err == nil {
			resp.Body.Close()
			w.err = "GET /rest/events: " + resp.Status
		} else {
			w.err = err.Error()
		}
		close(w.done)
		return w
	}
	go func() {
		defer close(w.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev event
			if json.Unmarshal([]byte(data), &ev) == nil {
				w.mu.Lock()
				w.events = append(w.events, ev)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// stop ends the stream and waits for its reader.
func (w *eventWatch) stop() {
	w.cancel()
	<-w.done
}

// of returns the events of type typ seen so far.
func (w *eventWatch) of(typ string) []event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []event
	for _, ev := range w.events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}
