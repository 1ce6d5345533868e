package s3test_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"lockstep/storage/blob/s3/s3test"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestProxyFaults(t *testing.T) {
	srv := s3test.NewServer(t)
	cfg, p := srv.Faulty(t, s3test.Faults{FailEvery: 2})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func() (int, string, error) {
		resp, err := client.Get("http://" + cfg.Endpoint + "/" + cfg.Bucket + "/k")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	// Unsigned requests: the server refuses them, the proxy fails every 2nd.
	if code, _, err := get(); err != nil || code == http.StatusServiceUnavailable {
		t.Fatalf("request 1: %d, %v; want the server's answer", code, err)
	}
	if code, body, err := get(); err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "<Code>SlowDown</Code>") {
		t.Fatalf("request 2: %d %q, %v; want 503 SlowDown", code, body, err)
	}
	p.SetFaults(s3test.Faults{ResetEvery: 1})
	if _, _, err := get(); err == nil {
		t.Fatal("request through a reset: no error")
	}
	p.SetFaults(s3test.Faults{StallEvery: 1, Stall: 200 * time.Millisecond})
	start := time.Now()
	if _, _, err := get(); err != nil || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("stalled request: %v after %v", err, time.Since(start))
	}
	// net/http may send a GET again after a reset, to be reset again.
	if c := p.Counts(); c.Requests != 3+c.Reset || c.Failed != 1 || c.Reset < 1 || c.Stalled != 1 {
		t.Errorf("Counts = %+v", c)
	}
}

// TestProxyStopsDuringStall: the proxy's cleanup ends a request stalled
// for an hour at once.
func TestProxyStopsDuringStall(t *testing.T) {
	srv := s3test.NewServer(t)
	done := make(chan error, 1)
	var stopped time.Time
	t.Run("stall", func(t *testing.T) {
		p := s3test.NewProxy(t, srv.Bucket(t).Endpoint)
		p.SetFaults(s3test.Faults{StallEvery: 1, Stall: time.Hour})
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		go func() {
			resp, err := (&http.Client{Transport: tr}).Get("http://" + p.Addr() + "/")
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		testutil.Eventually(t, 5*time.Second, "the request reaches the proxy", func() bool { return p.Counts().Stalled == 1 })
		stopped = time.Now()
	})
	select {
	case <-done:
		if d := time.Since(stopped); d > 5*time.Second {
			t.Errorf("the stalled request ended %v after the cleanup", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled request outlived the proxy")
	}
}
