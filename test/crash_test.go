package test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// TestKillDuringPull kills a node with SIGKILL while it pulls a large file:
// the real name never holds a partial file, and after a restart the folder
// converges and no temp file is left.
func TestKillDuringPull(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2)
	src, dst := c.dirs[0], c.dirs[1]
	const size = 256 << 20
	writeFile(t, filepath.Join(src, "large.bin"), randomBytes(7, size), 0o644)

	b := c.nodes[1]
	var st struct {
		Folders []struct {
			State          string `json:"state"`
			PullBytesDone  int64  `json:"pullBytesDone"`
			PullBytesTotal int64  `json:"pullBytesTotal"`
		} `json:"folders"`
	}
	testutil.Eventually(t, converge, "b to be part-way through the pull", func() bool {
		b.get("/rest/status", &st)
		return len(st.Folders) == 1 && st.Folders[0].PullBytesDone > 0 && st.Folders[0].PullBytesDone < size/2
	})
	b.kill()
	if fi, err := os.Stat(filepath.Join(dst, "large.bin")); err == nil {
		t.Fatalf("a partial file appeared under the real name (%d bytes)", fi.Size())
	}
	restarted := startNodeIn(t, "b", b.home)
	_ = restarted
	waitSame(t, 2*converge, src, dst)
}

// TestMassDeleteStops: peers' changes that would delete most of a folder
// stop it until the user allows them.
func TestMassDeleteStops(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2)
	a, b := c.dirs[0], c.dirs[1]
	for i := range 10 {
		writeFile(t, filepath.Join(a, "f", string(rune('0'+i))+".txt"), []byte{byte(i)}, 0o644)
	}
	waitSame(t, converge, a, b)
	// Move the directory out in one step, as a wiped or unmounted disk
	// would look: the watcher sees all deletions at once. (Deletions that
	// trickle in below the threshold are ordinary work and go through.)
	if err := os.Rename(filepath.Join(a, "f"), filepath.Join(t.TempDir(), "moved-away")); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Folders []struct {
			State string `json:"state"`
			Error string `json:"error"`
		} `json:"folders"`
	}
	testutil.Eventually(t, converge, "b to stop with an error", func() bool {
		c.nodes[1].get("/rest/status", &st)
		return len(st.Folders) == 1 && st.Folders[0].State == "error"
	})
	if n := len(snapshot(t, b)); n != 11 {
		t.Fatalf("b lost files before the user agreed: %d entries", n)
	}
	c.nodes[1].cli("folder", "allow-deletes", "f")
	waitSame(t, converge, a, b)
	c.nodes[1].get("/rest/status", &st)
	if st.Folders[0].State == "error" {
		t.Fatalf("still in error after allow-deletes: %s", st.Folders[0].Error)
	}
}

// TestIgnorePatterns: ignored files stay local; the ignore file syncs.
func TestIgnorePatterns(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2)
	a, b := c.dirs[0], c.dirs[1]
	writeFile(t, filepath.Join(a, ".lockstepignore"), []byte("*.tmp\n/build/\n!keep.tmp\n"), 0o644)
	c.nodes[0].cli("scan", "f")
	// The ignore file is scanned on its own, before the files it ignores.
	testutil.Eventually(t, converge, "a to index the ignore file", func() bool { return c.nodes[0].folder(t).LocalFiles == 1 })
	writeFile(t, filepath.Join(a, "x.tmp"), []byte("ignored"), 0o644)
	writeFile(t, filepath.Join(a, "keep.tmp"), []byte("kept"), 0o644)
	writeFile(t, filepath.Join(a, "build/out.o"), []byte("ignored"), 0o644)
	writeFile(t, filepath.Join(a, "src/build/x.c"), []byte("not anchored: synced"), 0o644)
	writeFile(t, filepath.Join(a, "note.txt"), []byte("synced"), 0o644)
	testutil.Eventually(t, converge, "synced files to arrive", func() bool {
		for _, n := range []string{".lockstepignore", "keep.tmp", "src/build/x.c", "note.txt"} {
			if _, err := os.Stat(filepath.Join(b, n)); err != nil {
				return false
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond) // room for an ignored file to arrive, which it must not
	for _, n := range []string{"x.tmp", "build/out.o", "build"} {
		if _, err := os.Stat(filepath.Join(b, n)); err == nil {
			t.Errorf("ignored %s was synced", n)
		}
	}
}
