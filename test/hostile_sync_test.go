package test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/test/testutil"
)

// hashHex is the hex BLAKE3 of content, as a one-block file's record
// names it.
func hashHex(content string) string {
	h := chunk.HashOf([]byte(content))
	return hex.EncodeToString(h[:])
}

// TestHostileMaxCounter: a trusted peer announces newer versions of two of
// the node's files whose counter for the node's own ID is 2^64-1 and a
// century ahead of the clock. Taken as they are, the node's next edit of
// the first would wrap to a small counter and lose to the peer's version
// (pulled back over the edit), and the second would carry a counter a
// century ahead to every peer. The node must refuse (or clamp) them with a
// warning, and its own edits must win, with counters of this time, both
// while the peer is connected and after it was removed.
func TestHostileMaxCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "victim")
	dir := filepath.Join(t.TempDir(), "f")
	writeFiles(t, dir, map[string]string{"max.txt": "original\n", "future.txt": "original too\n"})
	n.cli("folder", "add", "f", dir)
	home := filepath.Join(t.TempDir(), "hostile")
	hid := shareWithHostile(t, n, home, "f", false)
	nid, err := crypt.ParseDeviceID(n.ID)
	if err != nil {
		t.Fatal(err)
	}
	short := uint64(nid.Short())
	start := time.Now().Unix()

	h := startHostile(t, "max-counter", n, home, "f", "-duration", "2m")
	h.wait(20*time.Second, "the hostile versions to be announced", func(l hostileLine) bool {
		return l.Event == "announced" && l.Name == "future.txt"
	})
	// Time to act on them: a node that takes them pulls them.
	time.Sleep(2 * time.Second)

	// editWins edits the files on the node and checks, through the
	// observer run o, that the node announces its edits with counters of
	// this time, and that the edits stay on disk.
	editWins := func(o *hostileRun, edits map[string]string) {
		t.Helper()
		writeFiles(t, dir, edits)
		for name, content := range edits {
			l := o.wait(20*time.Second, "the node to announce its edit of "+name, func(l hostileLine) bool {
				return l.Event == "record" && l.Name == name && len(l.Hashes) == 1 && l.Hashes[0] == hashHex(content)
			})
			now := uint64(time.Now().Unix())
			if c := l.counter(short); c < uint64(start) || c > now+3600 {
				t.Errorf("the node's edit of %s has counter %d for itself, want the time of the edit (about %d): %+v", name, c, now, l.Version)
			}
			for _, c := range l.Version {
				if c.Value > now+365*24*3600 {
					t.Errorf("the node's record of %s carries counter %d of %x, over a year ahead of the clock", name, c.Value, c.ID)
				}
			}
		}
		consistently(t, 3*time.Second, "the node's edits on disk", func() bool {
			for name, content := range edits {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != content {
					t.Logf("%s holds %q (%v), want the node's edit %q", name, b, err, content)
					return false
				}
			}
			return true
		})
		if f := folderState(t, n, "f"); f.NeedFiles != 0 {
			t.Errorf("after its edits the node needs %d files: it takes the hostile versions for newer", f.NeedFiles)
		}
	}
	editWins(h, map[string]string{"max.txt": "edited on the node\n", "future.txt": "edited on the node, too\n"})
	for _, name := range []string{"max.txt", "future.txt"} {
		if len(logLines(n, "level=WARN", name)) == 0 {
			t.Errorf("no warning in the node's log about the hostile counter of %s", name)
		}
	}

	// Removing the peer must not leave its counters behind: a new,
	// honest peer sees the node's next edits with counters of this time.
	h.stop()
	n.cli("device", "remove", hid)
	ohome := filepath.Join(t.TempDir(), "observer")
	shareWithHostile(t, n, ohome, "f", false)
	o := startHostile(t, "observe", n, ohome, "f", "-duration", "2m")
	editWins(o, map[string]string{"max.txt": "edited again, the peer gone\n", "future.txt": "edited again too\n"})
}

// TestHostileIgnoredBlock: a trusted peer asks for blocks by name. The
// node serves a block of a file it announced at the announced offset,
// size and hash, and nothing else: not that file at another hash, offset
// or size, not an ignored file, not a file in an ignored directory, not a
// name it never announced.
func TestHostileIgnoredBlock(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "victim")
	dir := filepath.Join(t.TempDir(), "f")
	files := map[string]string{
		".lockstepignore": "secret*\nprivate/\n",
		"a.txt":           "announced content\n",
		"secret.txt":      "top secret\n",
		"private/key.txt": "private key\n",
	}
	writeFiles(t, dir, files)
	n.cli("folder", "add", "f", dir)
	home := filepath.Join(t.TempDir(), "hostile")
	shareWithHostile(t, n, home, "f", false)

	h := startHostile(t, "ignored-block", n, home, "f", "-duration", "0s", "-announced", "a.txt",
		"-probe", "secret.txt:11", "-probe", "private/key.txt:12", "-probe", "never-announced.txt:4")
	h.waitExit(30 * time.Second)
	got := map[string]hostileLine{}
	for _, l := range h.lines() {
		if l.Event == "request" {
			got[l.What+" "+l.Name] = l
		}
	}
	if l, ok := got["announced a.txt"]; !ok || !l.OK || l.Data != files["a.txt"] {
		t.Errorf("the announced block: %+v, want it served", l)
	}
	for _, what := range []string{"other-hash a.txt", "other-offset a.txt", "other-size a.txt",
		"probe secret.txt", "probe private/key.txt", "probe never-announced.txt"} {
		l, ok := got[what]
		switch {
		case !ok:
			t.Errorf("%s: not asked", what)
		case l.OK:
			t.Errorf("%s: served %q, want it refused", what, l.Data)
		}
	}
}

// TestHostilePullLoop: a trusted peer announces a .lockstepignore of "*",
// a symlink d and a file d/x beneath it, which the node cannot both write
// (d/x needs a directory d, and d is a symlink; and all is ignored, so a
// scan never records what a pull left there). The node must not spin on
// it: over 20 s its log has a handful of "pull failed" lines for them at
// most, it uses little CPU, and the folder's status shows the failure.
func TestHostilePullLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "victim")
	dir := filepath.Join(t.TempDir(), "f")
	n.cli("folder", "add", "f", dir)
	home := filepath.Join(t.TempDir(), "hostile")
	shareWithHostile(t, n, home, "f", false)

	h := startHostile(t, "pull-loop", n, home, "f", "-with-ignore", "-duration", "2m")
	h.wait(20*time.Second, "the symlink and the file under it to be announced", func(l hostileLine) bool {
		return l.Event == "announced" && l.Name == "d/x"
	})
	time.Sleep(time.Second) // the first attempts
	cpu := n.cpuSeconds()
	time.Sleep(20 * time.Second)
	used := n.cpuSeconds() - cpu
	failed := logLines(n, "pull failed", "name=d")
	t.Logf("%.2f s of CPU in 20 s, %d \"pull failed\" lines for d or d/x", used, len(failed))
	if used > 2 {
		t.Errorf("the node used %.2f s of CPU in 20 s with nothing to do but a file it cannot pull: it loops", used)
	}
	if len(failed) > 5 {
		t.Errorf("%d \"pull failed\" lines for d or d/x; want a failure logged once per change, not per attempt", len(failed))
	}
	// Debug lines aside, the node says little of d and d/x: once per
	// change, not once per attempt.
	said := 0
	for _, l := range logLines(n, "name=d") {
		if !strings.Contains(l, "level=DEBUG") {
			said++
		}
	}
	if said > 10 {
		t.Errorf("%d log lines name d or d/x: the node loops on them", said)
	}
	// Which of the two fails depends on the order they are pulled in.
	if f := folderState(t, n, "f"); !strings.Contains(f.Error, " d: ") && !strings.Contains(f.Error, " d/x: ") {
		t.Errorf("folder status %+v: want an error naming d or d/x", f)
	}
}

// TestHostileBadPolynomial: a trusted peer shares a new folder with its
// chunking polynomial "fixed" as 0x3 (irreducible, but of degree 1, which
// the chunker cannot use) and a file. The node must not adopt it: a file
// added on the node is chunked and announced, the folder shows no error,
// and the node never announces 0x3 as its polynomial.
func TestHostileBadPolynomial(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "victim")
	dir := filepath.Join(t.TempDir(), "f")
	n.cli("folder", "add", "f", dir)
	home := filepath.Join(t.TempDir(), "hostile")
	shareWithHostile(t, n, home, "f", false)

	h := startHostile(t, "bad-polynomial", n, home, "f", "-duration", "2m")
	h.wait(20*time.Second, "the peer's file to be announced", func(l hostileLine) bool {
		return l.Event == "announced" && l.Name == "peer.txt"
	})
	time.Sleep(time.Second) // time to adopt it, wrongly
	content := strings.Repeat("a file added on the node after the peer's polynomial\n", 100)
	writeFiles(t, dir, map[string]string{"local.txt": content})
	h.wait(20*time.Second, "the node to chunk and announce local.txt", func(l hostileLine) bool {
		return l.Event == "record" && l.Name == "local.txt" && len(l.Hashes) > 0
	})
	if f := folderState(t, n, "f"); f.State == "error" || f.Error != "" {
		t.Errorf("folder status after the peer's polynomial: %+v", f)
	}
	for _, l := range h.lines() {
		if l.Event == "cluster-config" && l.Folder == "f" && l.Polynomial == 0x3 {
			t.Errorf("the node announces the peer's polynomial 0x3 as its own (fixed: %v)", l.Fixed)
		}
	}
	if lines := logLines(n, "scan failed"); len(lines) > 0 {
		t.Errorf("scans fail: %s", lines[0])
	}
}

// TestHostileModesAndNames: a trusted peer announces a file of mode 0o7777
// and files whose names hold terminal escape sequences. The pulled file is
// neither world-writable nor setuid, setgid or sticky; the CLI shows the
// names escaped, never raw, where it prints them: `versions` (the first
// name's replaced version) and `status` (the folder's error naming the
// second, which the peer never serves).
func TestHostileModesAndNames(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const (
		escName    = "a\x1b[31mred"
		escRefused = "b\x1b[2Jrefused"
	)
	n := startNode(t, "victim")
	dir := filepath.Join(t.TempDir(), "f")
	n.cli("folder", "add", "f", dir)
	n.cli("folder", "versioning", "f", "--type", "simple", "--keep", "5")
	home := filepath.Join(t.TempDir(), "hostile")
	shareWithHostile(t, n, home, "f", false)

	h := startHostile(t, "modes", n, home, "f", "-duration", "2m")
	h.wait(20*time.Second, "the second batch to be announced", func(l hostileLine) bool {
		return l.Event == "announced" && l.Name == escRefused
	})
	fi, err := os.Stat(filepath.Join(dir, "mode.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode(); m&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 || m.Perm()&0o002 != 0 {
		t.Errorf("a peer's mode 0o7777 made the pulled file %v", m)
	}
	testutil.Eventually(t, 20*time.Second, "the second version of the escaped name to be pulled", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, escName))
		return err == nil && string(b) == "second version, longer\n"
	})
	testutil.Eventually(t, 20*time.Second, "the refused file to show as a folder error", func() bool {
		return strings.Contains(folderState(t, n, "f").Error, "refused")
	})
	versions := n.cli("versions", "f")
	status := n.cli("status")
	for cmd, out := range map[string]string{"versions f": versions, "status": status} {
		if strings.ContainsRune(out, '\x1b') {
			t.Errorf("lockstep %s prints a peer's file name raw, terminal escapes and all:\n%q", cmd, out)
		}
	}
	if !strings.Contains(versions, "red") {
		t.Errorf("lockstep versions f does not list the replaced version of %q:\n%q", escName, versions)
	}
	if !strings.Contains(status, "refused") {
		t.Errorf("lockstep status does not show the error naming %q:\n%q", escRefused, status)
	}
}
