package test

import (
	"path/filepath"
	"strings"
	"testing"

	"lockstep/test/testutil"
)

// TestRecoverThenJoin: a device that recovered a folder from a receiver
// joins it by adding the recovered directory as the folder: it chunks as
// the folder's devices do, so the receiver stores no chunk again, and
// meeting a device that has the same files makes no conflict copy of
// identical content. (Rejoining doubled the receiver's stored bytes and
// made a conflict copy of every file.)
func TestRecoverThenJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, r := startNode(t, "a"), startNode(t, "r")
	dir := filepath.Join(t.TempDir(), "a")
	writeFile(t, filepath.Join(dir, "big.bin"), randomBytes(21, 6<<20), 0o644)
	writeFile(t, filepath.Join(dir, "notes/todo.txt"), []byte("water the plants\n"), 0o644)
	writeFile(t, filepath.Join(dir, "notes/ideas.md"), randomBytes(22, 300_000), 0o600)
	a.cli("folder", "add", "docs", dir)
	holdFolder(t, r, "docs", a)
	pw := passwordFile(t, "rejoin password")
	backUpTo(t, a, r, "docs", pw)
	waitBackedUp(t, a, r, "docs")
	before := r.encFolder("docs").Receiver

	home := newDeviceFor(t, r, "docs")
	dst := filepath.Join(t.TempDir(), "recovered")
	mustRun(t, home, recoverArgs(r, "docs", pw, dst)...)
	// n joins with the receiver alone first, then meets a.
	n := startNodeIn(t, "n", home)
	n.cli("folder", "add", "docs", dst)
	testutil.Eventually(t, converge, "n to scan the recovered files", func() bool { return n.folder(t).LocalFiles >= 3 })
	backUpTo(t, n, r, "docs", pw)
	waitBackedUp(t, n, r, "docs")
	n.cli("device", "add", a.ID, "--name", "a", "--address", a.Listen)
	a.cli("device", "add", n.ID, "--name", "n", "--address", n.Listen)
	n.cli("folder", "share", "docs", a.ID)
	a.cli("folder", "share", "docs", n.ID)
	waitSame(t, converge, dir, dst)
	testutil.Eventually(t, converge, "a and n in sync", func() bool {
		fa, fn := a.folder(t), n.folder(t)
		return fa.NeedFiles == 0 && fn.NeedFiles == 0 && fa.State == "idle" && fn.State == "idle"
	})

	for _, tree := range []string{dir, dst} {
		for name := range snapshot(t, tree) {
			if strings.Contains(name, ".sync-conflict-") {
				t.Errorf("conflict copy of identical content: %s", name)
			}
		}
	}
	after := r.encFolder("docs").Receiver
	t.Logf("receiver before the join: %d chunks, %d bytes; after: %d chunks, %d bytes", before.Chunks, before.StoredBytes, after.Chunks, after.StoredBytes)
	if after.Chunks != before.Chunks {
		t.Errorf("the receiver stores %d chunks after the join, %d before: chunks were sent again", after.Chunks, before.Chunks)
	}
	if grew := after.StoredBytes - before.StoredBytes; grew > before.StoredBytes/10 {
		t.Errorf("the receiver's store grew by %d of %d bytes with the join", grew, before.StoredBytes)
	}
}
