package engine

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/restic/chunker"

	"lockstep/crypt"
	"lockstep/storage/db"
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
	b := startEngineWith(t, idB, map[string]string{"polynomial/f": strconv.FormatUint(uint64(small), 10)}, empty, db.Device{ID: idA.String()})
	a := startEngineWith(t, idA, map[string]string{"polynomial/f": strconv.FormatUint(uint64(large), 10)}, full, db.Device{ID: idB.String()})
	connect(t, a, b)

	deadline := time.Now().Add(60 * time.Second)
	for {
		st, _ := b.FolderStatus("f")
		if st.LocalFiles == files && st.NeedFiles == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b has %d of %d files", st.LocalFiles, files)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	go func() { a.ServeConn(ctx, b.id, ca); done <- struct{}{} }()
	go func() { b.ServeConn(ctx, a.id, cb); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
	})
}
