//go:build linux

package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"lockstep/test/testutil"
)

// TestChaosS3Outage: a receiver keeps its blobs in S3 (versitygw on
// loopback). While it ingests a folder, the S3 server goes away (killed
// or stopped) for a few seconds and comes back on the same port and
// directory, more than once. The receiver must resume by itself (no
// restart) and hold everything, and a recovery from it must give the
// folder back byte for byte.
func TestChaosS3Outage(t *testing.T) {
	endToEnd(t)
	rng := scenarioRand(t)
	outages := 2
	if long() {
		outages = 8
	}
	s3 := startS3(t)
	t.Setenv("LOCKSTEP_S3_ACCESS_KEY", s3.access)
	t.Setenv("LOCKSTEP_S3_SECRET_KEY", s3.secret)
	a := startNode(t, "a")
	r := startNode(t, "r", "--s3-endpoint", s3.addr, "--s3-bucket", s3.bucket, "--s3-insecure")
	dir := filepath.Join(t.TempDir(), "a")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a.cli("folder", "add", "docs", dir)
	holdFolder(t, r, a, "docs")
	pw := passwordFile(t, "chaos s3 password")
	w := &batchWriter{t: t, dir: dir, scratch: t.TempDir(), rng: rng, versions: map[string][]string{}}

	for i := range outages {
		before := s3.bytes()
		added := backupBatch(t, w, i, (24+rng.IntN(16))<<20)
		if i == 0 {
			backUpTo(t, a, r, "docs", pw)
		} else {
			a.cli("scan", "docs")
		}
		// Mid-ingest: once some of the batch is in the bucket.
		target := before + int64((0.1+0.6*rng.Float64())*float64(added))
		deadline := time.Now().Add(2 * time.Minute)
		for s3.bytes() < target && !backedUp(a, r, "docs") {
			if time.Now().After(deadline) {
				t.Fatalf("outage %d: the receiver stored too little within 2m:\n%s", i, receiverState(a, r, "docs"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		when := "mid-ingest"
		if backedUp(a, r, "docs") {
			when = "after the ingest"
		}
		kill := rng.IntN(2) == 0
		at := s3.bytes()
		s3.stop(kill)
		how := map[bool]string{true: "killed", false: "stopped"}[kill]
		// While it is down, look for the problem in status.
		down := 2*time.Second + time.Duration(rng.IntN(4000))*time.Millisecond
		shown := ""
		for end := time.Now().Add(down); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if shown == "" {
				shown = storeError(a, r, "docs")
			}
		}
		s3.start(t)
		t.Logf("outage %d: S3 %s %s (%s of %s new in the bucket) for %v; status showed: %q", i, how, when, mib(at-before), mib(added), down.Round(100*time.Millisecond), shown)
		start := time.Now()
		if !waitBackedUp(t, a, r, "docs", 2*time.Minute) {
			t.Fatalf("outage %d: the receiver did not take the rest within 2m of S3 coming back, without a restart (known defect: the receiver stops ingesting for good after one storage error):\n%s",
				i, receiverState(a, r, "docs"))
		}
		t.Logf("outage %d: the receiver holds everything %v after S3 came back", i, time.Since(start).Round(100*time.Millisecond))
	}
	recoverSame(t, r, "docs", pw, dir)
}

// s3Server is a versitygw that a test can stop and start again on the
// same port and directory.
type s3Server struct {
	bin, dir, addr         string
	access, secret, bucket string

	cmd    *exec.Cmd
	out    *testutil.LockedBuffer
	exited chan struct{}
}

// startS3 starts versitygw with its posix backend on a free loopback
// port, with a new bucket, until the test ends. Without the binary it
// skips the test, or fails it under CI=true.
func startS3(t *testing.T) *s3Server {
	t.Helper()
	bin := versitygw()
	if bin == "" {
		skipOrFail(t, "versitygw not found (set LOCKSTEP_VERSITYGW or install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
	}
	s := &s3Server{bin: bin, dir: t.TempDir(), access: randomHex(10), secret: randomHex(20), bucket: "chaos-" + randomHex(4)}
	for try := 0; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.addr = l.Addr().String()
		l.Close()
		err = s.run()
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || try == 2 {
			t.Fatalf("starting versitygw: %v", err)
		}
	}
	t.Cleanup(func() { s.stop(false) })

	transport, err := minio.DefaultTransport(false)
	if err != nil {
		t.Fatal(err)
	}
	defer transport.CloseIdleConnections()
	c, err := minio.New(s.addr, &minio.Options{
		Creds:     credentials.NewStaticV4(s.access, s.secret, ""),
		Region:    "us-east-1",
		Transport: transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatalf("creating bucket %s: %v", s.bucket, err)
	}
	return s
}

var errPortTaken = errors.New("port taken")

// run starts the server on s.addr and waits until it answers HTTP.
func (s *s3Server) run() error {
	s.out = &testutil.LockedBuffer{}
	s.exited = make(chan struct{})
	s.cmd = exec.Command(s.bin, "--port", s.addr, "--quiet", "posix", s.dir)
	s.cmd.Env = []string{"ROOT_ACCESS_KEY=" + s.access, "ROOT_SECRET_KEY=" + s.secret}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := s.exited
	go func(cmd *exec.Cmd) {
		cmd.Wait()
		close(exited)
	}(s.cmd)
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			if strings.Contains(s.out.String(), "address already in use") {
				return fmt.Errorf("%w: %s", errPortTaken, s.addr)
			}
			return fmt.Errorf("versitygw exited: %s", s.out.String())
		default:
		}
		if resp, err := probe.Get("http://" + s.addr + "/"); err == nil {
			resp.Body.Close()
			return nil
		}
	}
	s.stop(true)
	return fmt.Errorf("versitygw did not answer within 15s: %s", s.out.String())
}

// start starts the server again on its port and directory. The port was
// its own a moment ago; if another process took it meanwhile the test
// fails.
func (s *s3Server) start(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.run()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) || time.Now().After(deadline) {
			t.Fatalf("restarting versitygw on %s: %v", s.addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends the server: with SIGKILL if kill, else with an interrupt
// (and SIGKILL after 5 s). It does nothing if the server is not running.
func (s *s3Server) stop(kill bool) {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	if kill {
		s.cmd.Process.Kill()
	} else {
		s.cmd.Process.Signal(os.Interrupt)
	}
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// bytes returns the size of the files in the server's directory: what
// the bucket holds, and objects being written.
func (s *s3Server) bytes() int64 {
	var n int64
	filepath.WalkDir(s.dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// versitygw returns the path of the versitygw binary, found as the S3
// tests find it (storage/blob/s3/s3test), or "".
func versitygw() string {
	if p := os.Getenv("LOCKSTEP_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath := build.Default.GOPATH
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
