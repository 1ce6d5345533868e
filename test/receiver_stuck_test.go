package test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lockstep/storage/blob/s3/s3test"
	"lockstep/test/testutil"
)

// outage is a TCP proxy to a server that the test can take down: while
// down it cuts every connection through it and closes new ones at once,
// as a server that stopped would.
type outage struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

// newOutage proxies a loopback port to target until the test ends.
func newOutage(t testing.TB, target string) *outage {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &outage{l: l, target: target, conns: make(map[net.Conn]bool)}
	o.wg.Go(o.accept)
	t.Cleanup(func() {
		l.Close()
		o.setDown(true)
		o.wg.Wait()
	})
	return o
}

// addr is the proxy's address.
func (o *outage) addr() string { return o.l.Addr().String() }

// setDown takes the server down (cutting every connection) or back up.
func (o *outage) setDown(down bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = down
	if down {
		for c := range o.conns {
			c.Close()
		}
	}
}

// track registers c unless the server is down.
func (o *outage) track(c net.Conn) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		return false
	}
	o.conns[c] = true
	return true
}

func (o *outage) untrack(c net.Conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.conns, c)
	c.Close()
}

func (o *outage) accept() {
	for {
		c, err := o.l.Accept()
		if err != nil {
			return
		}
		if !o.track(c) {
			c.Close()
			continue
		}
		o.wg.Go(func() { o.splice(c) })
	}
}

// splice copies between c and a new connection to the target until
// either ends or the server goes down.
func (o *outage) splice(c net.Conn) {
	defer o.untrack(c)
	s, err := net.Dial("tcp", o.target)
	if err != nil || !o.track(s) {
		if s != nil {
			s.Close()
		}
		return
	}
	defer o.untrack(s)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
	c.Close()
	s.Close()
	<-done
}

// TestReceiverResumesAfterStoreOutage: a receiver whose bucket goes away
// for a while shows the failure in its folder's status, and once the
// bucket is back takes in by itself every record sent meanwhile, on the
// same connection; a recovery from it then gives the whole tree.
func TestReceiverResumesAfterStoreOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	cfg := s3test.Start(t)
	t.Setenv("LOCKSTEP_S3_ACCESS_KEY", cfg.AccessKey)
	t.Setenv("LOCKSTEP_S3_SECRET_KEY", cfg.SecretKey)
	bucket := newOutage(t, cfg.Endpoint)

	a := startNode(t, "a")
	r := startNode(t, "r", "--s3-endpoint", bucket.addr(), "--s3-bucket", cfg.Bucket, "--s3-insecure")
	pw := passwordFile(t, "correct horse battery staple")
	dir := filepath.Join(t.TempDir(), "a")
	writeFile(t, filepath.Join(dir, "before.txt"), []byte("stored before the outage\n"), 0o644)
	a.cli("folder", "add", "docs", dir)
	holdFolder(t, r, "docs", a)
	backUpTo(t, a, r, "docs", pw)
	waitBackedUp(t, a, r, "docs")
	if st := r.encFolder("docs"); st.Error != "" {
		t.Fatalf("r's folder before the outage: %+v", st)
	}

	bucket.setDown(true)
	for i := range 20 {
		size := 1000 + i
		if i%5 == 0 {
			size = 300_000 + i // a chunk of its own, requested by the receiver
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("during/file-%02d.bin", i)), randomBytes(uint64(100+i), size), 0o644)
	}
	testutil.Eventually(t, converge, "r's folder to show that it cannot store", func() bool {
		st := r.encFolder("docs")
		return st.State == "error" && strings.Contains(st.Error, "cannot store")
	})
	t.Logf("r's folder during the outage: %s", r.encFolder("docs").Error)
	if c, connected, _ := a.encFolder("docs").peer(r.ID); c == 100 || !connected {
		t.Fatalf("a's entry for r during the outage: completion %v, connected %v", c, connected)
	}

	bucket.setDown(false)
	waitBackedUp(t, a, r, "docs")
	testutil.Eventually(t, converge, "r's folder error to clear", func() bool {
		st := r.encFolder("docs")
		return st.Error == "" && st.State != "error"
	})
	if !strings.Contains(r.log.String(), "storing sealed records again") {
		t.Errorf("r's log does not say it stores again")
	}
	recoverSame(t, r, "docs", pw, dir)
}

// TestReceiverCleansStaleTemps: temporary files a crash left in a
// receiver's blob directory go when it starts, once older than the grace
// period; a fresh one stays.
func TestReceiverCleansStaleTemps(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	r := startNode(t, "r")
	blobs := filepath.Join(r.home, "blobs")
	if fi, err := os.Stat(blobs); err != nil || !fi.IsDir() {
		t.Fatalf("r's blob directory: %v", err)
	}
	r.kill()
	stale := []string{filepath.Join(blobs, ".tmp-crashed"), filepath.Join(blobs, "r", "ab", ".tmp-crashed")}
	fresh := filepath.Join(blobs, "r", "ab", ".tmp-fresh")
	long := time.Now().Add(-2 * time.Hour)
	for _, p := range append(stale, fresh) {
		writeFile(t, p, []byte("partial"), 0o600)
	}
	for _, p := range stale {
		if err := os.Chtimes(p, long, long); err != nil {
			t.Fatal(err)
		}
	}
	startNodeIn(t, "r", r.home)
	testutil.Eventually(t, converge, "the stale temporary files to go", func() bool {
		for _, p := range stale {
			if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				return false
			}
		}
		return true
	})
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a fresh temporary file went: %v", err)
	}
}
