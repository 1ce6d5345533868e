package engine

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/restic/chunker"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/router"
	"lockstep/test/testutil"
)

// TestScanKeepsItsPolynomial: a device scanning a full folder and an empty
// peer agree on one chunking polynomial, and the scan never chunks a file
// twice for it. The empty peer's polynomial is the smaller, which the rule
// for two empty folders prefers: before the polynomial was fixed when a
// scan began chunking, the scanning device adopted the peer's when its
// ClusterConfig came before the scan's first records were stored, and
// chunked everything again.
func TestScanKeepsItsPolynomial(t *testing.T) {
	small, large := randomPolynomial(t), randomPolynomial(t)
	if small > large {
		small, large = large, small
	}
	full, empty := t.TempDir(), t.TempDir()
	const files, size = 1500, 16 << 10
	for i := range files {
		data := []byte(fmt.Sprintf("%0*d", size, i))
		if err := os.WriteFile(filepath.Join(full, fmt.Sprintf("f%04d", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idA, idB := crypt.DeviceID{9}, crypt.DeviceID{1}
	// The empty one first, so that the full one's scan is under way (a
	// scan stores its first records after 1,000 files) when they connect.
	b := startEngineWith(t, idB, small, empty, db.Device{ID: idA.String()})
	a := startEngineWith(t, idA, large, full, db.Device{ID: idB.String()})
	connect(t, a, b)

	waitFor(t, "b to have every file", func() bool {
		st, _ := b.FolderStatus("f")
		return st.LocalFiles == files && st.NeedFiles == 0
	})
	st, _ := a.FolderStatus("f")
	if st.HashedBytes != files*size {
		t.Errorf("a's scans read %d bytes to chunk %d", st.HashedBytes, files*size)
	}
	ctx := context.Background()
	pa, err := a.folder("f").polynomial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.folder("f").polynomial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pa != pb {
		t.Errorf("a chunks with %v, b with %v", pa, pb)
	}
}

func randomPolynomial(t *testing.T) chunker.Pol {
	t.Helper()
	p, err := chunker.RandomPolynomial()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// connect serves a connection between a and b until the test ends.
func connect(t *testing.T, a, b *Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ca, cb := net.Pipe()
	done := make(chan struct{}, 2)
	ra, _ := routers.Load(a)
	rb, _ := routers.Load(b)
	go func() { ra.(*router.Router).ServeConn(ctx, b.id, ca); done <- struct{}{} }()
	go func() { rb.(*router.Router).ServeConn(ctx, a.id, cb); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
	})
}

// TestFixedPolynomialIsAnnounced: a folder whose scan fixes its polynomial
// tells its peers at once. Here the peer had the full folder's config
// from before the scan (polynomial not fixed, and the larger one), and
// shares the folder only afterwards: without a fresh config it would
// keep its own smaller polynomial, and the two would chunk differently
// for good.
func TestFixedPolynomialIsAnnounced(t *testing.T) {
	small, large := randomPolynomial(t), randomPolynomial(t)
	if small > large {
		small, large = large, small
	}
	full, empty := t.TempDir(), t.TempDir()
	idA, idB := crypt.DeviceID{9}, crypt.DeviceID{1}
	// b does not share the folder with a yet; a starts empty.
	b := startEngineWith(t, idB, small, empty)
	a := startEngineWith(t, idA, large, full, db.Device{ID: idB.String()})
	connect(t, a, b)
	ctx := context.Background()
	rb, _ := routers.Load(b)
	if rb.(*router.Router).WaitPeer(ctx, idA, time.Minute) == nil {
		t.Fatal("b did not hear a's config")
	}

	if err := os.WriteFile(filepath.Join(full, "x"), []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Scan("f"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to hold its file", func() bool {
		st, _ := a.FolderStatus("f")
		return st.LocalFiles == 1
	})

	if err := b.db.PutDevice(ctx, db.Device{ID: idA.String()}); err != nil {
		t.Fatal(err)
	}
	if err := b.db.ShareFolder(ctx, "f", idA.String()); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to adopt a's fixed polynomial", func() bool {
		pb, err := b.folder("f").polynomial(ctx)
		return err == nil && pb == large
	})
}

// waitFor waits up to a minute for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, time.Minute, what, cond)
}
