// Package s3test runs a real S3-compatible server, versitygw with its posix
// backend, on 127.0.0.1 for tests, and hands out empty buckets in it. With
// Options it speaks HTTPS with a certificate of a private authority, or
// serves another region.
//
// The versitygw binary is found through $LOCKSTEP_VERSITYGW, else $PATH,
// else $(go env GOPATH)/bin. Install it with
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//
// Without it, tests that need it fail when $CI is "true" and are skipped
// otherwise.
//
// NewProxy and Server.Faulty put a reverse proxy in front of a server that
// fails, resets or stalls requests as its Faults say, for tests of retries.
//
// Invariants: a server or proxy listens on loopback only, a server keeps
// its data in a directory of the test's, and both are stopped (and waited
// for) in the test's cleanup, so no process or goroutine outlives the
// test.
package s3test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"lockstep/storage/blob/s3"
	"lockstep/test/testutil"
)

const (
	region       = "us-east-1"
	startTimeout = 15 * time.Second
	stopTimeout  = 5 * time.Second
	startTries   = 3
)

// Server is a running versitygw.
type Server struct {
	cfg     s3.Config // without a bucket
	client  *minio.Client
	buckets atomic.Int64
	pid     int
}

// Options change the server NewServerWith starts.
type Options struct {
	// TLS makes the server speak HTTPS only, with a certificate for
	// 127.0.0.1 of a new authority in Config's CAFile.
	TLS bool
	// Region is the server's region; empty means us-east-1.
	Region string
}

// Start starts a server that tb's cleanup stops and returns the Config of a
// new, empty bucket in it.
func Start(tb testing.TB) s3.Config {
	tb.Helper()
	return NewServer(tb).Bucket(tb)
}

// NewServer starts a server that tb's cleanup stops. Use Bucket for a fresh
// bucket per test.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	return NewServerWith(tb, Options{})
}

// NewServerWith is NewServer with options.
func NewServerWith(tb testing.TB, opts Options) *Server {
	tb.Helper()
	bin := findBinary()
	if bin == "" {
		msg := "versitygw not found (set LOCKSTEP_VERSITYGW or install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	if opts.Region == "" {
		opts.Region = region
	}
	s := &Server{cfg: s3.Config{AccessKey: randomHex(10), SecretKey: randomHex(20), Region: opts.Region}}
	var args []string
	var roots *x509.CertPool
	if opts.TLS {
		var cert, key string
		s.cfg.CAFile, cert, key, roots = newCertificates(tb)
		s.cfg.UseTLS = true
		args = []string{"--cert", cert, "--key", key}
	}
	if opts.Region != region {
		args = append(args, "--region", opts.Region)
	}
	var err error
	for range startTries {
		if s.cfg.Endpoint, s.pid, err = start(tb, bin, s.cfg, roots, args); !errors.Is(err, errPortTaken) {
			break
		}
	}
	if err != nil {
		tb.Fatalf("starting versitygw: %v", err)
	}
	transport, err := minio.DefaultTransport(opts.TLS)
	if err != nil {
		tb.Fatal(err)
	}
	if opts.TLS {
		transport.TLSClientConfig.RootCAs = roots
	}
	s.client, err = minio.New(s.cfg.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(s.cfg.AccessKey, s.cfg.SecretKey, ""),
		Secure:    opts.TLS,
		Region:    opts.Region,
		Transport: transport,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(transport.CloseIdleConnections)
	return s
}

// CPUSeconds is the CPU time the server has used so far. Benchmarks on one
// machine report it, since the server's work there competes with the
// nodes' for the same cores.
func (s *Server) CPUSeconds() float64 { return testutil.CPUSeconds(s.pid) }

// Config returns the Config of the server, without a bucket.
func (s *Server) Config() s3.Config { return s.cfg }

// Bucket creates a new, empty bucket and returns its Config.
func (s *Server) Bucket(tb testing.TB) s3.Config {
	tb.Helper()
	cfg := s.cfg
	cfg.Bucket = fmt.Sprintf("test-%d-%s", s.buckets.Add(1), randomHex(4))
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.client.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: s.cfg.Region}); err != nil {
		tb.Fatalf("creating bucket %s: %v", cfg.Bucket, err)
	}
	return cfg
}

var errPortTaken = errors.New("port taken")

// start runs versitygw on a free loopback port, with more args before
// its backend, until tb's cleanup and returns its address once it answers
// HTTP, or HTTPS with a certificate of roots if cfg.UseTLS, and its pid.
func start(tb testing.TB, bin string, cfg s3.Config, roots *x509.CertPool, args []string) (string, int, error) {
	addr, err := freePort()
	if err != nil {
		return "", 0, err
	}
	var out testutil.LockedBuffer
	// --keep-alive as S3 services keep connections: versitygw closes each
	// one after its answer by default, which made every request of the
	// benchmarks pay a connection (and over TLS a handshake).
	args = append(append([]string{"--port", addr, "--quiet", "--keep-alive"}, args...), "posix", tb.TempDir())
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"ROOT_ACCESS_KEY=" + cfg.AccessKey, "ROOT_SECRET_KEY=" + cfg.SecretKey}
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return "", 0, err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	tb.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			cmd.Process.Kill()
			<-exited
		}
	})
	scheme := "http"
	if cfg.UseTLS {
		scheme = "https"
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: roots},
	}}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			if strings.Contains(out.String(), "address already in use") {
				return "", 0, fmt.Errorf("%w: %s", errPortTaken, addr)
			}
			return "", 0, fmt.Errorf("versitygw exited: %s", out.String())
		default:
		}
		if resp, err := client.Get(scheme + "://" + addr + "/"); err == nil {
			resp.Body.Close()
			return addr, cmd.Process.Pid, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", 0, fmt.Errorf("versitygw did not answer within %v: %s", startTimeout, out.String())
}

// freePort returns a loopback address with a port that was free a moment
// ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// findBinary returns the path of versitygw, or "".
func findBinary() string {
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
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
