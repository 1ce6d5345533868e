package engine

import (
	"os"
	"path/filepath"
	"testing"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/events"
)

// TestPullPublishes: a pull tells its bus what it does: the folder goes
// syncing and back to idle, and each file pulled is an ItemFinished; the
// peer's index arriving is a FolderSummary.
func TestPullPublishes(t *testing.T) {
	full, empty := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	idA, idB := crypt.DeviceID{9}, crypt.DeviceID{1}
	b := startEngineWith(t, idB, 0, empty, db.Device{ID: idA.String()})
	a := startEngineWith(t, idA, 0, full, db.Device{ID: idB.String()})
	connect(t, a, b)
	seen := map[string]bool{}
	waitFor(t, "b's events of the pull", func() bool {
		evs, err := b.opts.Events.Since(0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			switch d := ev.Data.(type) {
			case events.FolderStateChanged:
				if d.Folder == "f" {
					seen[d.From+">"+d.State] = true
				}
			case events.ItemFinished:
				if d.Folder == "f" && d.Name == "x.txt" && d.Action == events.ActionUpdate && d.Error == "" {
					seen["x.txt"] = true
				}
			case events.FolderSummary:
				seen["summary"] = true
			}
		}
		return seen["idle>syncing"] && seen["syncing>idle"] && seen["x.txt"] && seen["summary"]
	})
}
