package retry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/storage/blob/limit"
	"lockstep/storage/blob/metered"
	"lockstep/storage/blob/retry"
	"lockstep/storage/blob/s3"
	"lockstep/storage/blob/s3/s3test"
)

func openS3(t *testing.T, cfg s3.Config) *s3.Store {
	t.Helper()
	s, err := s3.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// s3Retries retry often enough that a call meeting a fault on every
// attempt, when concurrent calls line it up with every Nth request, is
// all but impossible. The suite's 5 MiB blob of unknown size is no
// io.Seeker: the buffer holds it, as the S3 store buffers such a blob up
// to s3.PartSize anyway.
func s3Retries() retry.Options {
	return retry.Options{
		Attempts: 10, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond,
		Transient: s3.Transient, Buffer: s3.PartSize, Logger: quiet(),
	}
}

// faultyS3 returns a retrying store over S3 reached through a proxy with
// faults f, checking in t's cleanup that the proxy did spoil requests.
func faultyS3(t *testing.T, srv *s3test.Server, f s3test.Faults) blob.Store {
	t.Helper()
	cfg, proxy := srv.Faulty(t, s3test.Faults{})
	st := openS3(t, cfg) // opened without faults: New makes no retries
	proxy.SetFaults(f)
	t.Cleanup(func() {
		if c := proxy.Counts(); c.Requests >= 20 && c.Failed+c.Reset == 0 {
			t.Errorf("the proxy spoiled none of %d requests", c.Requests)
		}
	})
	return retry.New(st, s3Retries())
}

// TestS3ConformanceFailEvery5 runs the suite on S3 through a proxy that
// answers every 5th request 503 SlowDown: with retries nothing is lost.
func TestS3ConformanceFailEvery5(t *testing.T) {
	srv := s3test.NewServer(t)
	blobtest.Run(t, func(t *testing.T) blob.Store { return faultyS3(t, srv, s3test.Faults{FailEvery: 5}) })
}

// TestS3ConformanceResetsAndStalls runs the suite on the stack serve
// builds, retry over metered over limit over S3, through a proxy that
// fails every 13th request, resets every 7th connection and stalls every
// 11th request.
func TestS3ConformanceResetsAndStalls(t *testing.T) {
	srv := s3test.NewServer(t)
	blobtest.Run(t, func(t *testing.T) blob.Store {
		cfg, proxy := srv.Faulty(t, s3test.Faults{})
		m := metered.NewMeter()
		st := metered.New(limit.New(openS3(t, cfg), limit.Options{Concurrency: 4}), m)
		proxy.SetFaults(s3test.Faults{FailEvery: 13, ResetEvery: 7, StallEvery: 11, Stall: 20 * time.Millisecond})
		t.Cleanup(func() {
			// A reset may pass unseen (net/http sends some requests
			// again itself); a 503 may not.
			c, u := proxy.Counts(), m.Snapshot()
			if c.Failed > 0 && u.Put.Errors+u.Get.Errors+u.Head.Errors+u.List.Errors+u.Delete.Errors == 0 {
				t.Errorf("the proxy failed %d requests, the meter counted no error", c.Failed)
			}
		})
		return retry.New(st, s3Retries())
	})
}

// TestS3FaultsNeedRetries shows that the faulty setup of
// TestS3ConformanceFailEvery5 does fail calls without the retry wrapper,
// with errors s3.Transient calls transient, and that the same calls all
// succeed with it. (Resets alone may not fail a call: net/http sends a
// request again by itself when a reused connection dies before answering.)
func TestS3FaultsNeedRetries(t *testing.T) {
	srv := s3test.NewServer(t)
	for _, f := range []s3test.Faults{{FailEvery: 5}, {FailEvery: 3, ResetEvery: 5}} {
		cfg, proxy := srv.Faulty(t, s3test.Faults{})
		bare := openS3(t, cfg)
		proxy.SetFaults(f)
		run := func(s blob.Store) (failed int) {
			for i := range 10 {
				key := fmt.Sprintf("k/%d", i)
				b := bytes.Repeat([]byte{byte(i)}, 1000*i)
				err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b)))
				if err == nil {
					err = s.Get(t.Context(), key, func(r io.Reader) error {
						got, err := io.ReadAll(r)
						if err == nil && !bytes.Equal(got, b) {
							err = fmt.Errorf("read back %d bytes, not the %d put", len(got), len(b))
						}
						return err
					})
				}
				if err != nil {
					failed++
					if !s3.Transient(err) {
						t.Errorf("%+v: %v, not transient", f, err)
					}
				}
			}
			return failed
		}
		if n := run(bare); n == 0 {
			t.Errorf("%+v: no call failed without retries", f)
		}
		if n := run(retry.New(bare, s3Retries())); n != 0 {
			t.Errorf("%+v: %d calls failed with retries", f, n)
		}
	}
}
