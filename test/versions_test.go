package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

type versionJSON struct {
	Path    string    `json:"path"`
	Version string    `json:"version"`
	Time    time.Time `json:"time"`
	Size    int64     `json:"size"`
	Source  string    `json:"source"`
}

func (n *node) versions(args ...string) []versionJSON {
	n.t.Helper()
	var vs []versionJSON
	if err := json.Unmarshal([]byte(n.cli(append(append([]string{"versions"}, args...), "--json")...)), &vs); err != nil {
		n.t.Fatal(err)
	}
	return vs
}

func waitContent(t *testing.T, path, want string) {
	t.Helper()
	testutil.Eventually(t, converge, path+" to read "+want, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && string(b) == want
	})
}

// TestVersioningAndRestore: with versioning on, files a peer replaces or
// deletes are kept under .lockstep/versions, listed, restored in place
// (which syncs) or elsewhere, and cleaned by prune.
func TestVersioningAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	c := newCluster(t, 2)
	b := c.nodes[1]
	b.cli("folder", "versioning", "f", "--type", "simple", "--keep", "5")
	if out := b.cli("folder", "versioning", "f"); !strings.Contains(out, "simple") {
		t.Fatalf("versioning shows %q", out)
	}
	x, y := filepath.Join(c.dirs[0], "x.txt"), filepath.Join(c.dirs[0], "sub", "y.txt")
	for i, v := range []string{"one", "two", "three"} {
		writeFile(t, x, []byte(v), 0o644)
		if i == 0 {
			writeFile(t, y, []byte("doomed"), 0o644)
		}
		waitContent(t, filepath.Join(c.dirs[1], "x.txt"), v)
	}
	if err := os.Remove(y); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, converge, "the deletion to reach b", func() bool {
		_, err := os.Stat(filepath.Join(c.dirs[1], "sub", "y.txt"))
		return os.IsNotExist(err)
	})
	vs := b.versions("f", "x.txt")
	if len(vs) != 2 || vs[0].Size != 3 || vs[1].Size != 3 || !vs[0].Time.After(vs[1].Time.Add(-time.Second)) {
		t.Fatalf("versions of x.txt on b: %+v", vs)
	}
	if _, err := os.Stat(filepath.Join(c.dirs[1], ".lockstep", "versions")); err != nil {
		t.Fatalf("versions are not plain files under .lockstep/versions: %v", err)
	}
	if got := b.versions("f", "sub/y.txt"); len(got) != 1 || got[0].Size != 6 {
		t.Fatalf("versions of the deleted file: %+v", got)
	}

	// The oldest version, elsewhere.
	out := filepath.Join(t.TempDir(), "out")
	b.cli("restore", "f", "x.txt", "--version", vs[1].Version, "--to", out)
	if got, _ := os.ReadFile(filepath.Join(out, "x.txt")); string(got) != "one" {
		t.Fatalf("restored elsewhere: %q", got)
	}
	// The newest, in place: it syncs back to a, and "three" is kept.
	b.cli("restore", "f", "x.txt")
	waitContent(t, x, "two")
	// The deleted file comes back everywhere.
	b.cli("restore", "f", "sub/y.txt")
	waitContent(t, y, "doomed")
	// Restoring copies the version, and the replaced "three" is kept too.
	if got := b.versions("f", "x.txt"); len(got) != 3 || got[0].Size != 5 {
		t.Fatalf("after restoring in place, versions of x.txt: %+v", got)
	}

	// Prune with a smaller policy keeps the newest version per file.
	b.cli("folder", "versioning", "f", "--type", "simple", "--keep", "1")
	res := b.cli("prune", "f")
	if !strings.Contains(res, "removed 2 local versions") {
		t.Fatalf("prune said %q", res)
	}
	if got := b.versions("f", "x.txt"); len(got) != 1 {
		t.Fatalf("after prune, versions of x.txt: %+v", got)
	}
	r := run(t, b.home, "restore", "f", "x.txt", "--version", "no-such-version")
	if r.code == 0 {
		t.Fatal("restoring an unknown version succeeded")
	}
	assertOneLineError(t, r)
	waitSame(t, converge, c.dirs[0], c.dirs[1])
}

// TestReceiverPrune: a receiver applies its retention policy on its own,
// frees the chunks only dropped versions used, and the trusted device
// carries on without seeing a rollback.
func TestReceiverPrune(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, r := startNode(t, "a"), startNode(t, "r")
	dir := filepath.Join(t.TempDir(), "a")
	x := filepath.Join(dir, "x.bin")
	writeFile(t, x, randomBytes(1, 300_000), 0o644)
	a.cli("folder", "add", "docs", dir)
	holdFolder(t, r, "docs", a)
	pw := passwordFile(t, "pw")
	backUpTo(t, a, r, "docs", pw)
	waitBackedUp(t, a, r, "docs")
	for i := range 3 {
		writeFile(t, x, randomBytes(uint64(10+i), 300_000), 0o644)
		a.cli("scan", "docs")
		want := int64(2 + i)
		testutil.Eventually(t, converge, "r to hold the new version", func() bool {
			st := r.encFolder("docs")
			return st.Receiver != nil && st.Receiver.Records >= want
		})
	}
	waitBackedUp(t, a, r, "docs")
	before := r.encFolder("docs").Receiver

	r.cli("folder", "retention", "docs", "--keep-last", "1")
	if out := r.cli("prune", "docs", "--dry-run", "--grace", "0s"); !strings.Contains(out, "would drop 3 versions") {
		t.Fatalf("dry run said %q", out)
	}
	if got := r.encFolder("docs").Receiver; got.Records != before.Records {
		t.Fatalf("the dry run dropped records: %+v", got)
	}
	out := r.cli("prune", "docs", "--grace", "0s")
	if !strings.Contains(out, "dropped 3 versions") {
		t.Fatalf("prune said %q", out)
	}
	after := r.encFolder("docs").Receiver
	if after.Records != before.Records-3 || after.StoredBytes >= before.StoredBytes {
		t.Fatalf("after prune %+v, before %+v", after, before)
	}
	t.Logf("prune: %s; stored bytes %d -> %d", strings.TrimSpace(out), before.StoredBytes, after.StoredBytes)

	// The device carries on: a new version is backed up, no alarm.
	writeFile(t, x, randomBytes(99, 300_000), 0o644)
	a.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to hold the newest version", func() bool {
		return r.encFolder("docs").Receiver.Records == after.Records+1
	})
	waitBackedUp(t, a, r, "docs")
	if _, _, e := a.encFolder("docs").peer(r.ID); e != "" {
		t.Fatalf("a reports a problem after the prune: %s", e)
	}
	// And the current state still recovers.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	recoverSame(t, r, "docs", pw, dir)
}

// TestReceiverVersionsAndRestore: a trusted device lists the versions a
// receiver keeps and restores one file, or the whole folder as it was at a
// time, from them.
func TestReceiverVersionsAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, r := startNode(t, "a"), startNode(t, "r")
	dir := filepath.Join(t.TempDir(), "a")
	x, y := filepath.Join(dir, "x.txt"), filepath.Join(dir, "d", "y.bin")
	writeFile(t, x, []byte("version one"), 0o644)
	writeFile(t, y, randomBytes(3, 500_000), 0o640)
	a.cli("folder", "add", "docs", dir)
	holdFolder(t, r, "docs", a)
	backUpTo(t, a, r, "docs", passwordFile(t, "pw"))
	waitBackedUp(t, a, r, "docs")
	// Versions are listed to the second: then is a second apart from the
	// backup before it and the edits after it.
	time.Sleep(1100 * time.Millisecond)
	then := time.Now().UTC()
	time.Sleep(1100 * time.Millisecond)
	for _, v := range []string{"version two", "version three"} {
		// Replaced whole, as editors save: written in place, the watcher
		// may catch the file truncated and back up an empty version too.
		tmp := filepath.Join(t.TempDir(), "x.txt")
		writeFile(t, tmp, []byte(v), 0o644)
		if err := os.Rename(tmp, x); err != nil {
			t.Fatal(err)
		}
		a.cli("scan", "docs")
		testutil.Eventually(t, converge, "the new version on r", func() bool {
			for _, vv := range a.versions("docs", "x.txt") {
				if vv.Size == int64(len(v)) && vv.Source == r.ID && vv.Time.After(then) && len(a.versions("docs", "x.txt")) >= 2 {
					return true
				}
			}
			return false
		})
	}
	writeFile(t, filepath.Join(dir, "later.txt"), []byte("made after"), 0o644)
	a.cli("scan", "docs")
	waitBackedUp(t, a, r, "docs")

	vs := a.versions("docs", "x.txt")
	if len(vs) != 3 {
		t.Fatalf("versions of x.txt: %+v", vs)
	}
	for _, v := range vs {
		if v.Source != r.ID {
			t.Fatalf("a version from %q, want the receiver", v.Source)
		}
	}
	oldest := vs[len(vs)-1]

	out := filepath.Join(t.TempDir(), "one")
	a.cli("restore", "docs", "x.txt", "--version", oldest.Version, "--to", out)
	if got, _ := os.ReadFile(filepath.Join(out, "x.txt")); string(got) != "version one" {
		t.Fatalf("restored from the receiver: %q", got)
	}

	all := filepath.Join(t.TempDir(), "all")
	a.cli("restore", "docs", "--all", "--at", then.Format(time.RFC3339), "--to", all)
	if got, _ := os.ReadFile(filepath.Join(all, "x.txt")); string(got) != "version one" {
		t.Fatalf("x.txt as it was: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(all, "d", "y.bin")); string(got) != string(randomBytes(3, 500_000)) {
		t.Fatal("d/y.bin as it was differs")
	}
	if _, err := os.Stat(filepath.Join(all, "later.txt")); !os.IsNotExist(err) {
		t.Fatalf("a file made after the time was restored (%v)", err)
	}

	// In place, by time: the folder goes back and the receiver gets it.
	a.cli("restore", "docs", "x.txt", "--at", then.Format(time.RFC3339))
	waitContent(t, x, "version one")
	testutil.Eventually(t, converge, "the restored version backed up", func() bool { return len(a.versions("docs", "x.txt")) == 4 })
}

// TestFiveEditsEverySource: a file edited five times on one node shows
// its versions on the other node, kept locally and on the receiver, each
// restorable to its exact bytes; a point-in-time restore of the whole
// folder equals a snapshot taken at that time.
func TestFiveEditsEverySource(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	r := startNode(t, "r")
	holdFolder(t, r, "f", a, b)
	pw := passwordFile(t, "pw")
	b.cli("folder", "versioning", "f", "--type", "simple", "--keep", "10")
	x := filepath.Join(c.dirs[0], "x.txt")
	writeFile(t, x, []byte("edit 0"), 0o644)
	writeFile(t, filepath.Join(c.dirs[0], "d", "y.bin"), randomBytes(8, 700_000), 0o600)
	if err := os.Symlink("x.txt", filepath.Join(c.dirs[0], "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(c.dirs[0], "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	backUpTo(t, a, r, "f", pw)
	backUpTo(t, b, r, "f", pw)
	waitSame(t, converge, c.dirs[0], c.dirs[1])
	waitBackedUp(t, a, r, "f")
	then := time.Now().UTC()
	want := snapshot(t, c.dirs[0])
	time.Sleep(1100 * time.Millisecond) // versions are listed to the second: the edits come a second after then

	contents := map[string]bool{"edit 0": true}
	for i := 1; i <= 5; i++ {
		v := "edit " + string(rune('0'+i))
		contents[v] = true
		writeFile(t, x, []byte(v), 0o644)
		waitContent(t, filepath.Join(c.dirs[1], "x.txt"), v)
		waitBackedUp(t, a, r, "f")
	}
	vs := b.versions("f", "x.txt")
	local, remote := 0, 0
	for _, v := range vs {
		switch v.Source {
		case "local":
			local++
		case r.ID:
			remote++
		}
	}
	t.Logf("b lists %d local and %d receiver versions of x.txt", local, remote)
	if local != 5 || remote < 6 {
		t.Fatalf("b's versions of x.txt: %+v", vs)
	}
	restored := map[string]bool{}
	for i, v := range vs {
		dir := filepath.Join(t.TempDir(), "v"+string(rune('a'+i)))
		b.cli("restore", "f", "x.txt", "--version", v.Version, "--to", dir)
		got, err := os.ReadFile(filepath.Join(dir, "x.txt"))
		if err != nil || !contents[string(got)] {
			t.Fatalf("version %s restored as %q (%v)", v.Version, got, err)
		}
		restored[string(got)] = true
	}
	if len(restored) != 6 {
		t.Fatalf("restored %d distinct contents of 6", len(restored))
	}

	// A deleted file comes back, on both nodes.
	if err := os.Remove(filepath.Join(c.dirs[0], "d", "y.bin")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, converge, "the deletion on b", func() bool {
		_, err := os.Stat(filepath.Join(c.dirs[1], "d", "y.bin"))
		return os.IsNotExist(err)
	})
	b.cli("restore", "f", "d/y.bin")
	testutil.Eventually(t, converge, "the restored file on a", func() bool {
		_, err := os.Stat(filepath.Join(c.dirs[0], "d", "y.bin"))
		return err == nil
	})

	// The whole folder as it was.
	dst := filepath.Join(t.TempDir(), "then")
	b.cli("restore", "f", "--all", "--at", then.Format(time.RFC3339Nano), "--to", dst)
	if d := diffTrees(want, snapshot(t, dst)); d != "" {
		t.Fatalf("the folder restored as of %v differs from a snapshot then:\n%s", then, d)
	}
}
