package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lockstep/test/testutil"
)

// The everyday controls through the real binary: pausing folders and
// devices (and that it lasts across a restart), renaming a device,
// unsharing, a folder's type, ignore patterns, what a folder needs and
// why, and its recent changes.

// quiet is how long a test watches for something that must not happen.
const quiet = 4 * time.Second

// folderStateOf is folder "f"'s state as `folder list --json` prints it.
func folderStateOf(t *testing.T, n *node) string {
	t.Helper()
	var fs []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(n.cli("folder", "list", "--json")), &fs); err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.ID == "f" {
			return f.State
		}
	}
	t.Fatalf("%s has no folder f", n.name)
	return ""
}

// deviceEntry is one device as `device list --json` prints it.
type deviceEntry struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
	Paused    bool   `json:"paused"`
}

func deviceOf(t *testing.T, n *node, id string) deviceEntry {
	t.Helper()
	var ds []deviceEntry
	if err := json.Unmarshal([]byte(n.cli("device", "list", "--json")), &ds); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("%s does not know %s", n.name, id)
	return deviceEntry{}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// restart stops n and starts it again on its home, listening where it
// did, so peers that dial it find it again.
func restart(t *testing.T, n *node) *node {
	t.Helper()
	if err := n.stop(); err != nil {
		t.Fatalf("stopping %s: %v", n.name, err)
	}
	return startNodeIn(t, n.name, n.home, "--listen", n.Listen)
}

// TestFolderPause: a paused folder takes nothing from its peer, says
// "paused", stays paused across a restart, and catches up once resumed.
func TestFolderPause(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	writeFile(t, filepath.Join(c.dirs[0], "before.txt"), []byte("before"), 0o644)
	waitSame(t, converge, c.dirs...)

	b.cli("folder", "pause", "f")
	if got := folderStateOf(t, b); got != "paused" {
		t.Fatalf("b's folder after pause: %q, want paused", got)
	}
	writeFile(t, filepath.Join(c.dirs[0], "while-paused.txt"), []byte("x"), 0o644)
	a.cli("scan", "f")
	testutil.Eventually(t, converge, "a to record its change", func() bool {
		return strings.Contains(a.cli("folder", "changes", "f"), "while-paused.txt")
	})
	consistently(t, quiet, "b's paused folder not getting while-paused.txt", func() bool {
		return !exists(filepath.Join(c.dirs[1], "while-paused.txt"))
	})
	// A paused folder neither scans nor answers what it needs.
	if r := run(t, b.home, "scan", "f"); r.code == 0 || !strings.Contains(r.stderr, "paused") {
		t.Errorf("scan of a paused folder: exit %d, %s", r.code, r.stderr)
	}
	if r := run(t, b.home, "folder", "needed", "f"); r.code == 0 || !strings.Contains(r.stderr, "paused") {
		t.Errorf("needed of a paused folder: exit %d, %s", r.code, r.stderr)
	}

	b = restart(t, b)
	if got := folderStateOf(t, b); got != "paused" {
		t.Fatalf("b's folder after a restart: %q, want paused", got)
	}
	testutil.Eventually(t, converge, "b to reconnect", func() bool { return b.connectedTo(a.ID) })
	consistently(t, quiet, "b's folder, paused across the restart, not getting while-paused.txt", func() bool {
		return !exists(filepath.Join(c.dirs[1], "while-paused.txt"))
	})

	b.cli("folder", "resume", "f")
	waitSame(t, converge, c.dirs...)
	if got := folderStateOf(t, b); got == "paused" {
		t.Fatal("b's folder still paused after resume")
	}
}

// TestDevicePauseAndRename: a paused device is disconnected and stays so
// (neither dialled nor let in, nor listed as pending) across a restart;
// resumed, it connects again. A rename shows in `device list`.
func TestDevicePauseAndRename(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	testutil.Eventually(t, converge, "a and b to connect", func() bool { return a.connectedTo(b.ID) })

	a.cli("device", "rename", b.ID, "the other laptop")
	if out := a.cli("device", "list"); !strings.Contains(out, "the other laptop") {
		t.Errorf("device list after a rename:\n%s", out)
	}

	a.cli("device", "pause", b.ID)
	testutil.Eventually(t, converge, "a and b to disconnect", func() bool {
		return !a.connectedTo(b.ID) && !b.connectedTo(a.ID)
	})
	if d := deviceOf(t, a, b.ID); !d.Paused || d.Name != "the other laptop" {
		t.Errorf("a's entry of b: %+v, want paused and renamed", d)
	}
	if out := a.cli("device", "list"); !strings.Contains(out, "paused") {
		t.Errorf("device list does not say b is paused:\n%s", out)
	}
	writeFile(t, filepath.Join(c.dirs[1], "from-b.txt"), []byte("b"), 0o644)
	b.cli("scan", "f")
	// b keeps dialling a; a refuses it and does not list it as pending.
	consistently(t, quiet, "a and b staying apart", func() bool {
		return !a.connectedTo(b.ID) && !b.connectedTo(a.ID) && !exists(filepath.Join(c.dirs[0], "from-b.txt"))
	})
	if out := a.cli("pending"); strings.Contains(out, b.ID) {
		t.Errorf("a lists the paused device as pending:\n%s", out)
	}

	a = restart(t, a)
	if d := deviceOf(t, a, b.ID); !d.Paused {
		t.Fatalf("after a restart, a's entry of b: %+v, want paused", d)
	}
	consistently(t, quiet, "a and b staying apart after a's restart", func() bool {
		return !a.connectedTo(b.ID) && !b.connectedTo(a.ID)
	})

	a.cli("device", "resume", b.ID)
	testutil.Eventually(t, converge, "a and b to connect again", func() bool { return a.connectedTo(b.ID) })
	waitSame(t, converge, c.dirs...)
	if !exists(filepath.Join(c.dirs[0], "from-b.txt")) {
		t.Error("from-b.txt did not arrive after the resume")
	}
}

// TestUnshareAndFolderType: a receive-only folder takes its peer's changes
// and keeps its own; a folder unshared from a device sends it nothing more.
func TestUnshareAndFolderType(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	writeFile(t, filepath.Join(c.dirs[0], "first.txt"), []byte("1"), 0o644)
	waitSame(t, converge, c.dirs...)

	b.cli("folder", "type", "f", "receiveonly")
	if r := run(t, b.home, "folder", "type", "f", "encrypted"); r.code == 0 {
		t.Error("a synced folder became encrypted")
	}
	writeFile(t, filepath.Join(c.dirs[1], "local-only.txt"), []byte("mine"), 0o644)
	b.cli("scan", "f")
	testutil.Eventually(t, converge, "b to record its local change", func() bool {
		return strings.Contains(b.cli("folder", "changes", "f"), "local-only.txt")
	})
	writeFile(t, filepath.Join(c.dirs[0], "from-a.txt"), []byte("a"), 0o644)
	a.cli("scan", "f")
	testutil.Eventually(t, converge, "a receive-only b to take from-a.txt", func() bool {
		return exists(filepath.Join(c.dirs[1], "from-a.txt"))
	})
	consistently(t, quiet, "b's local change staying on b", func() bool {
		return !exists(filepath.Join(c.dirs[0], "local-only.txt"))
	})

	a.cli("folder", "unshare", "f", b.ID)
	writeFile(t, filepath.Join(c.dirs[0], "after-unshare.txt"), []byte("a"), 0o644)
	a.cli("scan", "f")
	consistently(t, quiet, "b not getting what a wrote after unsharing", func() bool {
		return !exists(filepath.Join(c.dirs[1], "after-unshare.txt"))
	})
}

// TestIgnoresAndNeeded: ignore patterns set through the CLI take effect
// at once; an item that cannot be pulled is listed as needed with the
// reason, and the folder's recent changes say who changed what.
func TestIgnoresAndNeeded(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]

	// b ignores *.keep, and keeps one in a directory it shares.
	patterns := filepath.Join(t.TempDir(), "patterns")
	writeFile(t, patterns, []byte("*.keep\n"), 0o644)
	b.cli("folder", "ignores", "f", "--set-file", patterns)
	if got := b.cli("folder", "ignores", "f"); got != "*.keep\n" {
		t.Fatalf("ignores read back: %q", got)
	}
	if r := run(t, b.home, "folder", "ignores", "f", "--set-file", "/nonexistent/patterns"); r.code == 0 {
		t.Error("a missing patterns file was taken")
	}
	writeFile(t, filepath.Join(c.dirs[1], "clash", "private.keep"), []byte("b's own"), 0o644)
	b.cli("scan", "f")
	testutil.Eventually(t, converge, "a to get the directory clash", func() bool {
		fi, err := os.Stat(filepath.Join(c.dirs[0], "clash"))
		return err == nil && fi.IsDir()
	})
	if exists(filepath.Join(c.dirs[0], "clash", "private.keep")) {
		t.Fatal("an ignored file was sent")
	}

	// On a the directory becomes a file, which b cannot put in place: its
	// directory still holds the ignored file.
	if err := os.Remove(filepath.Join(c.dirs[0], "clash")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(c.dirs[0], "clash"), []byte("a file now"), 0o644)
	a.cli("scan", "f")
	var needed struct {
		Total int `json:"total"`
		Items []struct {
			Name       string `json:"name"`
			Action     string `json:"action"`
			Device     string `json:"device"`
			DeviceName string `json:"deviceName"`
			Reason     string `json:"reason"`
			Failed     bool   `json:"failed"`
		} `json:"items"`
	}
	testutil.Eventually(t, converge, "b to list clash as stuck", func() bool {
		if err := json.Unmarshal([]byte(b.cli("folder", "needed", "f", "--json")), &needed); err != nil {
			t.Fatal(err)
		}
		return needed.Total == 1 && len(needed.Items) == 1 && needed.Items[0].Failed
	})
	it := needed.Items[0]
	if it.Name != "clash" || it.Action != "update" || it.Device != a.ID || it.DeviceName != "a" || !strings.Contains(it.Reason, "directory") {
		t.Errorf("b's needed item: %+v, want clash from a, failing on the directory", it)
	}
	if out := b.cli("folder", "needed", "f"); !strings.Contains(out, "clash") || !strings.Contains(out, it.Reason) {
		t.Errorf("folder needed:\n%s", out)
	}

	// Without the ignored file the directory can go: clash arrives and
	// b needs nothing.
	if err := os.Remove(filepath.Join(c.dirs[1], "clash", "private.keep")); err != nil {
		t.Fatal(err)
	}
	b.cli("folder", "ignores", "f", "--set-file", patterns) // rescans
	testutil.Eventually(t, 2*converge, "clash to arrive on b", func() bool {
		got, _ := os.ReadFile(filepath.Join(c.dirs[1], "clash"))
		return string(got) == "a file now"
	})
	testutil.Eventually(t, converge, "b to need nothing", func() bool {
		return strings.Contains(b.cli("folder", "needed", "f"), "in sync")
	})

	var changes struct {
		Changes []struct {
			Name       string `json:"name"`
			Action     string `json:"action"`
			DeviceName string `json:"deviceName"`
			Local      bool   `json:"local"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(b.cli("folder", "changes", "f", "--json")), &changes); err != nil {
		t.Fatal(err)
	}
	// The newest change of clash is a's (.lockstepignore, rewritten, is
	// b's own change and may come after it).
	found := false
	for _, ch := range changes.Changes {
		if ch.Name == "clash" {
			found = true
			if ch.DeviceName != "a" || ch.Local || ch.Action != "update" {
				t.Errorf("b's newest change of clash: %+v, want a's update", ch)
			}
			break
		}
	}
	if !found {
		t.Errorf("b's recent changes do not list clash: %+v", changes.Changes)
	}
}

// TestConsoleControls drives the controls in headless Chromium: pausing
// and resuming a device and a folder, renaming a device, and saving ignore
// patterns, each checked on the node itself.
func TestConsoleControls(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	browser := newBrowser(t)
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	ca := openConsole(t, browser, a)
	ca.setUp()
	row := `tr[data-device="` + b.ID + `"]`

	ca.visit("/devices", row)
	ca.waitConnected(b.ID)
	ca.submit("pausing b", nil, row+" .pause-device", "#flash")
	if got := ca.text("#flash"); !strings.Contains(got, "Paused") {
		t.Fatalf("pausing b: flash %q", got)
	}
	if got := ca.text(row + " .state"); got != "paused" {
		t.Errorf("b's state after pausing: %q", got)
	}
	testutil.Eventually(t, converge, "b to disconnect", func() bool { return !a.connectedTo(b.ID) })
	if d := deviceOf(t, a, b.ID); !d.Paused {
		t.Errorf("a's entry of b after pausing in the console: %+v", d)
	}
	ca.submit("resuming b", nil, row+" .resume-device", "#flash")
	ca.waitConnected(b.ID)

	ca.click("opening the rename form", row+" details.rename summary")
	ca.submit("renaming b", map[string]string{row + " .rename-name": "bee's laptop"}, row+" .rename-device", "#flash")
	if got := ca.text(row + " .name"); got != "bee's laptop" {
		t.Errorf("b's name after renaming: %q", got)
	}
	if d := deviceOf(t, a, b.ID); d.Name != "bee's laptop" {
		t.Errorf("a's entry of b after renaming in the console: %+v", d)
	}

	ca.visit("/folders/f", "#pause-folder")
	ca.submit("pausing the folder", nil, "#pause-folder", "#resume-folder")
	if got := ca.text("#flash"); !strings.Contains(got, "Paused folder f") {
		t.Errorf("pausing f: flash %q", got)
	}
	if got := folderStateOf(t, a); got != "paused" {
		t.Errorf("f after pausing in the console: %q", got)
	}
	ca.submit("resuming the folder", nil, "#resume-folder", "#pause-folder")
	if got := folderStateOf(t, a); got == "paused" {
		t.Error("f still paused after resuming in the console")
	}

	ca.submit("saving ignore patterns", map[string]string{"#ignores-text": "*.bak\nbuild/\n"}, "#ignores-submit", "#flash")
	if got, _ := os.ReadFile(filepath.Join(c.dirs[0], ".lockstepignore")); string(got) != "*.bak\nbuild/\n" {
		t.Errorf(".lockstepignore after saving in the console: %q", got)
	}
	ca.submit("saving a bad pattern", map[string]string{"#ignores-text": "ok\n!\n"}, "#ignores-submit", "#flash.flash-error")
	if got, _ := os.ReadFile(filepath.Join(c.dirs[0], ".lockstepignore")); string(got) != "*.bak\nbuild/\n" {
		t.Errorf("a refused pattern changed .lockstepignore to %q", got)
	}

	// A stuck item and the recent changes on the folder's page: b turns
	// a directory into a file, which a cannot put in place while its
	// directory holds a file a ignores.
	ca.submit("ignoring *.keep", map[string]string{"#ignores-text": "*.keep\n"}, "#ignores-submit", "#flash")
	writeFile(t, filepath.Join(c.dirs[0], "clash", "private.keep"), []byte("a's own"), 0o644)
	a.cli("scan", "f")
	testutil.Eventually(t, converge, "b to get the directory clash", func() bool {
		fi, err := os.Stat(filepath.Join(c.dirs[1], "clash"))
		return err == nil && fi.IsDir()
	})
	if err := os.Remove(filepath.Join(c.dirs[1], "clash")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(c.dirs[1], "clash"), []byte("a file now"), 0o644)
	b.cli("scan", "f")
	testutil.Eventually(t, converge, "a to fail on clash", func() bool {
		return strings.Contains(a.cli("folder", "needed", "f"), "directory")
	})
	stuck := `#needed-items tr[data-name="clash"] .reason.error`
	ca.visit("/folders/f", stuck)
	if got := ca.text(stuck); !strings.Contains(got, "directory") {
		t.Errorf("the page's reason for clash: %q", got)
	}
	if got := ca.text(`#changes tr[data-name="clash"] .by`); got != "this device" {
		t.Errorf("who made clash, on the page: %q", got)
	}

	// Everything fits a phone, with these rows and forms.
	ca.run("a phone's width", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, p := range []string{"/folders/f", "/devices", "/folders"} {
		if bad := overflowing(ca, p); len(bad) > 0 {
			t.Errorf("at 390 px %s does not fit:\n  %s", p, strings.Join(bad, "\n  "))
		}
	}
	if n := ca.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}

// overflowing visits path and lists what sticks out of the viewport's
// width: the page itself, or any control.
func overflowing(c *console, path string) []string {
	c.visit(path, "main")
	return get(c, "measuring "+path, chromedp.Evaluate[[]string](`(() => {
		const w = document.documentElement.clientWidth, out = [];
		if (document.documentElement.scrollWidth > w) out.push("the page is " + document.documentElement.scrollWidth + " px wide");
		document.querySelectorAll("button, a, input, select, textarea, summary").forEach(e => {
			const r = e.getBoundingClientRect();
			if ((r.width || r.height) && (r.right > w + 0.5 || r.left < -0.5)) out.push(e.tagName + " " + (e.id || e.className) + " spans " + Math.round(r.left) + " to " + Math.round(r.right));
		});
		return out;
	})()`))
}
