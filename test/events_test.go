package test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/sync/events"
)

// stream follows n's GET /rest/events from its oldest held event; each
// event goes to the returned channel until the test ends.
func (n *node) stream(t *testing.T) <-chan events.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.GUI+"/rest/events?since=0", nil)
	req.Header.Set("X-API-Key", n.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /rest/events on %s: %v", n.name, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		t.Fatalf("GET /rest/events on %s: %s, %s", n.name, resp.Status, resp.Header.Get("Content-Type"))
	}
	out := make(chan events.Event, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev events.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Errorf("an event from %s does not decode: %v: %s", n.name, err, data)
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

// waitEvent reads evs until pred holds for an event, or fails after d.
func waitEvent(t *testing.T, evs <-chan events.Event, d time.Duration, what string, pred func(events.Event) bool) events.Event {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev := <-evs:
			if pred(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("timed out after %v waiting for the event of %s", d, what)
		}
	}
}

// TestEventsWhileSyncing: a node's event stream, read through the real
// binary's REST API, shows its peer connecting, a folder syncing and going
// idle again, and the file it pulled.
func TestEventsWhileSyncing(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	evs := b.stream(t)
	waitEvent(t, evs, converge, "a connected", func(ev events.Event) bool {
		d, ok := ev.Data.(events.DeviceConnected)
		return ok && d.Device == a.ID
	})
	writeFile(t, filepath.Join(c.dirs[0], "news.txt"), []byte("fresh\n"), 0o644)
	waitEvent(t, evs, converge, "b syncing", func(ev events.Event) bool {
		d, ok := ev.Data.(events.FolderStateChanged)
		return ok && d.Folder == "f" && d.State == events.StateSyncing
	})
	waitEvent(t, evs, converge, "news.txt pulled", func(ev events.Event) bool {
		d, ok := ev.Data.(events.ItemFinished)
		return ok && d.Folder == "f" && d.Name == "news.txt" && d.Error == ""
	})
	waitEvent(t, evs, converge, "b idle again", func(ev events.Event) bool {
		d, ok := ev.Data.(events.FolderStateChanged)
		return ok && d.Folder == "f" && d.From == events.StateSyncing && d.State == events.StateIdle
	})
	waitSame(t, converge, c.dirs[0], c.dirs[1])
}
