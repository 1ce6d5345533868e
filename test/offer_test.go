package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// TestFolderOfferAccepted: a folder shared by a device that the other side
// does not have yet shows up as pending there; accepting it creates the
// folder, shares it back and syncs it.
func TestFolderOfferAccepted(t *testing.T) {
	a, b := startNode(t, "a"), startNode(t, "b")
	a.cli("device", "add", b.ID, "--address", b.Listen)
	b.cli("device", "add", a.ID, "--address", a.Listen)
	src := filepath.Join(t.TempDir(), "photos")
	writeFile(t, filepath.Join(src, "cat.jpg"), randomBytes(3, 200000), 0o644)
	a.cli("folder", "add", "photos", src, "--label", "Photos")
	a.cli("folder", "share", "photos", b.ID)
	testutil.Eventually(t, 30*time.Second, "the offer to be pending on b", func() bool {
		return strings.Contains(b.cli("pending"), "photos")
	})
	dst := filepath.Join(t.TempDir(), "accepted")
	b.cli("pending", "accept", "photos", "--path", dst)
	waitSame(t, converge, src, dst)
	if out := b.cli("pending"); strings.Contains(out, "photos") {
		t.Errorf("offer still pending after acceptance:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dst, "cat.jpg")); err != nil {
		t.Fatal(err)
	}
	r := run(t, b.home, "pending", "accept", "nothing-like-this")
	if r.code == 0 {
		t.Error("accepting an unknown offer succeeded")
	}
}
