package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/storage/blob/limit"
	"lockstep/storage/blob/local"
	"lockstep/storage/blob/mem"
	"lockstep/storage/blob/metered"
	"lockstep/storage/blob/retry"
	"lockstep/storage/blob/s3"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// errReset is a transient error as a network store reports one.
var errReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

// flaky is a mem.Store whose every nth call fails with errReset before
// doing anything, except a List, which fails after giving fn its first
// blob.
type flaky struct {
	*mem.Store
	n     int64
	calls atomic.Int64
}

func (f *flaky) fail(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.calls.Add(1)%f.n == 0 {
		return errReset
	}
	return nil
}

func (f *flaky) Put(ctx context.Context, k string, r io.Reader, n int64) error {
	if err := f.fail(ctx); err != nil {
		// A transfer broken early; like a real store, it reports the
		// reader's own error first.
		if _, rerr := io.CopyN(io.Discard, r, 10); rerr != nil && rerr != io.EOF {
			return rerr
		}
		return err
	}
	return f.Store.Put(ctx, k, r, n)
}

func (f *flaky) Create(ctx context.Context, k string, r io.Reader, n int64) error {
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.Store.Create(ctx, k, r, n)
}

func (f *flaky) PutUnsynced(ctx context.Context, k string, r io.Reader, n int64) error {
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.Store.PutUnsynced(ctx, k, r, n)
}

func (f *flaky) Sync(ctx context.Context) error {
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.Store.Sync(ctx)
}

func (f *flaky) Get(ctx context.Context, k string, fn func(io.Reader) error) error {
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.Store.Get(ctx, k, fn)
}

func (f *flaky) GetRange(ctx context.Context, k string, off, n int64, fn func(io.Reader) error) error {
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.Store.GetRange(ctx, k, off, n, fn)
}

func (f *flaky) Stat(ctx context.Context, k string) (blob.Info, error) {
	if err := f.fail(ctx); err != nil {
		return blob.Info{}, err
	}
	return f.Store.Stat(ctx, k)
}

func (f *flaky) Delete(ctx context.Context, k string) error {
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.Store.Delete(ctx, k)
}

func (f *flaky) List(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	failing := f.calls.Add(1)%f.n == 0
	given := 0
	err := f.Store.List(ctx, prefix, func(info blob.Info) error {
		if failing && given == 1 {
			return errReset
		}
		given++
		return fn(info)
	})
	return err
}

func fast(log *slog.Logger) retry.Options {
	return retry.Options{Attempts: 4, BaseDelay: time.Microsecond, MaxDelay: time.Millisecond, Logger: log}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(*testing.T) blob.Store { return retry.New(mem.New(), fast(quiet())) })
}

// TestConformanceFlaky runs the suite on a store failing every 3rd call:
// with retries nothing shows. Run alone, a call's retry is the next call,
// which succeeds; among concurrent calls one may fail again with chance
// 1/3, so 20 attempts make running out (3e-10 a call) all but impossible.
func TestConformanceFlaky(t *testing.T) {
	o := fast(quiet())
	o.Attempts = 20
	blobtest.Run(t, func(*testing.T) blob.Store {
		return retry.New(&flaky{Store: mem.New(), n: 3}, o)
	})
}

// TestConformanceLocalStack runs the suite on retry∘limit∘metered over a
// local store.
func TestConformanceLocalStack(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		st, err := local.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return retry.New(limit.New(metered.New(st, metered.NewMeter()), limit.Options{Concurrency: 4, Upload: 1 << 30, Download: 1 << 30}), fast(quiet()))
	})
}

// counting is a store whose calls all fail with err, counting attempts.
type counting struct {
	blob.Store
	err   error
	calls atomic.Int64
}

func (c *counting) Put(context.Context, string, io.Reader, int64) error {
	c.calls.Add(1)
	return c.err
}

func (c *counting) Stat(context.Context, string) (blob.Info, error) {
	c.calls.Add(1)
	return blob.Info{}, c.err
}

func TestPermanentNotRetried(t *testing.T) {
	for _, err := range []error{
		blob.ErrNotExist, blob.ErrExist, fmt.Errorf("x: %w", blob.ErrInvalidKey), blob.ErrSizeMismatch,
		context.Canceled, fmt.Errorf("getting: %w", context.DeadlineExceeded),
		minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403},
		fmt.Errorf("wrapped: %w", minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}),
		fmt.Errorf("%w: b", s3.ErrNoBucket),
		errors.New("something else"),
	} {
		c := &counting{Store: mem.New(), err: err}
		s := retry.New(c, retry.Options{Attempts: 5, BaseDelay: time.Microsecond, Transient: s3.Transient, Logger: quiet()})
		if _, got := s.Stat(t.Context(), "k"); !errors.Is(got, err) {
			t.Errorf("Stat = %v, want %v", got, err)
		}
		if n := c.calls.Load(); n != 1 {
			t.Errorf("%v: %d attempts, want 1", err, n)
		}
	}
}

func TestTransientRetriedUpToAttempts(t *testing.T) {
	for _, err := range []error{
		errReset,
		minio.ErrorResponse{Code: "SlowDown", StatusCode: 503},
		fmt.Errorf("putting: %w", minio.ErrorResponse{Code: "InternalError", StatusCode: 500}),
		minio.ErrorResponse{Code: "RequestTimeout", StatusCode: 400},
		minio.ErrorResponse{Code: "ServiceUnavailable", StatusCode: 503},
	} {
		rec := &testutil.LogRecorder{}
		c := &counting{Store: mem.New(), err: err}
		s := retry.New(c, retry.Options{Attempts: 4, BaseDelay: time.Microsecond, Transient: s3.Transient, Logger: slog.New(rec)})
		if got := s.Put(t.Context(), "k", strings.NewReader("x"), 1); !errors.Is(got, err) {
			t.Errorf("Put = %v, want %v", got, err)
		}
		if n := c.calls.Load(); n != 4 {
			t.Errorf("%v: %d attempts, want 4", err, n)
		}
		if n := rec.Count(slog.LevelWarn, "blob store call failed, retrying"); n != 3 {
			t.Errorf("%v: %d retries logged, want 3", err, n)
		}
	}
}

// TestCancelDuringBackoff cancels a call sleeping an hour before its retry.
func TestCancelDuringBackoff(t *testing.T) {
	c := &counting{Store: mem.New(), err: errReset}
	s := retry.New(c, retry.Options{Attempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour, Logger: quiet()})
	ctx, cancel := context.WithCancel(t.Context())
	var slept atomic.Bool
	time.AfterFunc(50*time.Millisecond, func() { slept.Store(true); cancel() })
	start := time.Now()
	for {
		// The first delay is random in [0, 1h]: almost surely long.
		err := s.Put(ctx, "k", strings.NewReader("x"), 1)
		if slept.Load() {
			if !errors.Is(err, context.Canceled) || !errors.Is(err, errReset) {
				t.Errorf("Put canceled in its backoff = %v, want Canceled and the last error", err)
			}
			break
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Put returned %v after cancel", d)
	}
}

// TestDelaysBounded checks full jitter: every delay within its bound, and
// not all of them at the bound.
func TestDelaysBounded(t *testing.T) {
	c := &counting{Store: mem.New(), err: errReset}
	rec := &delayRecorder{}
	s := retry.New(c, retry.Options{Attempts: 8, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond, Logger: slog.New(rec)})
	for range 5 {
		s.Put(t.Context(), "k", strings.NewReader("x"), 1)
	}
	if len(rec.delays) != 5*7 {
		t.Fatalf("%d delays logged, want 35", len(rec.delays))
	}
	atBound := 0
	for i, d := range rec.delays {
		n := i%7 + 1
		bound := min(time.Millisecond<<(n-1), 4*time.Millisecond)
		if d < 0 || d > bound {
			t.Errorf("delay after attempt %d = %v, bound %v", n, d, bound)
		}
		if d == bound {
			atBound++
		}
	}
	if atBound == len(rec.delays) {
		t.Error("no jitter")
	}
}

type delayRecorder struct {
	testutil.LogRecorder
	delays []time.Duration
}

func (d *delayRecorder) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "delay" {
			d.delays = append(d.delays, a.Value.Duration())
		}
		return true
	})
	return nil
}

// onlyReader hides io.Seeker.
type onlyReader struct{ io.Reader }

// TestUnseekableBody: a body that is no io.Seeker is retried when the
// failed attempt read at most Buffer bytes, and not when it read more.
func TestUnseekableBody(t *testing.T) {
	f := &flaky{Store: mem.New(), n: 1 << 62}
	f.calls.Store(1<<62 - 1) // the next call fails
	s := retry.New(f, retry.Options{Attempts: 3, BaseDelay: time.Microsecond, Buffer: 5, Logger: quiet()})
	// The failed attempt reads 10 bytes: more than 5.
	err := s.Put(t.Context(), "k", onlyReader{strings.NewReader("0123456789abcdef")}, 16)
	if !errors.Is(err, errReset) {
		t.Fatalf("Put = %v, want the reset, not retried", err)
	}
	f.calls.Store(1<<62 - 1)
	s = retry.New(f, retry.Options{Attempts: 3, BaseDelay: time.Microsecond, Buffer: 16, Logger: quiet()})
	if err := s.Put(t.Context(), "k", onlyReader{strings.NewReader("0123456789abcdef")}, 16); err != nil {
		t.Fatalf("Put with a buffer as large as the failed attempt's reads: %v", err)
	}
	if f.calls.Load() != 1<<62+1 {
		t.Errorf("%d attempts, want 2", f.calls.Load()-(1<<62-1))
	}
	f.Store.Get(t.Context(), "k", func(r io.Reader) error {
		if b, _ := io.ReadAll(r); string(b) != "0123456789abcdef" {
			t.Errorf("replayed body stored as %q", b)
		}
		return nil
	})
	// A seekable body is sought back: no buffer needed.
	f.calls.Store(1<<62 - 1)
	s = retry.New(f, retry.Options{Attempts: 3, BaseDelay: time.Microsecond, Buffer: -1, Logger: quiet()})
	r := strings.NewReader("skip:seekable body")
	r.Seek(5, io.SeekStart)
	if err := s.Put(t.Context(), "k", r, -1); err != nil {
		t.Fatalf("Put of a seekable body: %v", err)
	}
	f.Store.Get(t.Context(), "k", func(r io.Reader) error {
		if b, _ := io.ReadAll(r); string(b) != "seekable body" {
			t.Errorf("sought-back body stored as %q", b)
		}
		return nil
	})
}

// lostAnswer creates the blob and then reports a transient error, as when
// a response is lost on the way back.
type lostAnswer struct {
	*mem.Store
	lose atomic.Int64
}

func (l *lostAnswer) Create(ctx context.Context, k string, r io.Reader, n int64) error {
	err := l.Store.Create(ctx, k, r, n)
	if err == nil && l.lose.Add(-1) >= 0 {
		return errReset
	}
	return err
}

func TestCreateAfterLostAnswer(t *testing.T) {
	la := &lostAnswer{Store: mem.New()}
	s := retry.New(la, fast(quiet())).(blob.Creator)
	la.lose.Store(1)
	if err := s.Create(t.Context(), "log/1", strings.NewReader("entry one"), -1); err != nil {
		t.Fatalf("Create whose first answer was lost = %v, want nil: the blob is ours", err)
	}
	// Someone else's blob is still ErrExist, after a lost answer or not.
	if err := s.Create(t.Context(), "log/1", strings.NewReader("entry two"), -1); !errors.Is(err, blob.ErrExist) {
		t.Fatalf("Create over another blob = %v, want ErrExist", err)
	}
	if err := la.Store.Put(t.Context(), "log/2", strings.NewReader("theirs"), -1); err != nil {
		t.Fatal(err)
	}
	f := &flaky{Store: la.Store, n: 1 << 62}
	f.calls.Store(1<<62 - 1)
	s2 := retry.New(f, fast(quiet())).(blob.Creator)
	if err := s2.Create(t.Context(), "log/2", strings.NewReader("mine"), -1); !errors.Is(err, blob.ErrExist) {
		t.Fatalf("Create over another blob after a transient failure = %v, want ErrExist", err)
	}
	if err := s2.Create(t.Context(), "log/2", strings.NewReader("theirs"), -1); !errors.Is(err, blob.ErrExist) {
		t.Fatalf("Create over the same bytes without a transient failure = %v, want ErrExist", err)
	}
}

// breaksMidway hands fn a reader that fails with a reset after 3 bytes.
type breaksMidway struct {
	*mem.Store
	calls atomic.Int64
}

func (b *breaksMidway) Get(ctx context.Context, k string, fn func(io.Reader) error) error {
	b.calls.Add(1)
	return fn(io.MultiReader(strings.NewReader("abc"), &failing{errReset}))
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

func TestGetNotRetriedOnceFnCalled(t *testing.T) {
	b := &breaksMidway{Store: mem.New()}
	s := retry.New(b, fast(quiet()))
	calls := 0
	err := s.Get(t.Context(), "k", func(r io.Reader) error {
		calls++
		_, err := io.ReadAll(r)
		return err
	})
	if !errors.Is(err, errReset) || calls != 1 || b.calls.Load() != 1 {
		t.Errorf("Get = %v after %d fn calls and %d attempts, want the reset after 1 and 1", err, calls, b.calls.Load())
	}
}

func TestListResumes(t *testing.T) {
	f := &flaky{Store: mem.New(), n: 1 << 62}
	for i := range 5 {
		f.Store.Put(t.Context(), fmt.Sprintf("k%d", i), bytes.NewReader(nil), 0)
	}
	f.calls.Store(1<<62 - 1) // the first List fails after one blob
	s := retry.New(f, fast(quiet()))
	var keys []string
	if err := s.List(t.Context(), "", func(i blob.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, ","); got != "k0,k1,k2,k3,k4" {
		t.Errorf("List across a failure gave %s, want each key once", got)
	}
}

// readsTwice reads a body through once and then seeks back to store it,
// as the S3 store does to checksum it: it needs the body to seek.
type readsTwice struct {
	*mem.Store
	seekable bool
	under    io.Reader // blob.InnermostBody of the body
}

func (s *readsTwice) Put(ctx context.Context, k string, r io.Reader, n int64) error {
	rs, ok := r.(io.ReadSeeker)
	s.seekable, s.under = ok, blob.InnermostBody(r)
	if !ok {
		return s.Store.Put(ctx, k, r, n)
	}
	if _, err := io.Copy(io.Discard, rs); err != nil {
		return err
	}
	if pos, err := rs.Seek(-3, io.SeekCurrent); err != nil || pos != n-3 {
		return fmt.Errorf("Seek(-3, current) = %d, %v; want %d", pos, err, n-3)
	}
	if _, err := rs.Seek(-1, io.SeekStart); err == nil {
		return errors.New("seek before the start allowed")
	}
	if _, err := rs.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return s.Store.Put(ctx, k, rs, n)
}

// TestSeekableBodyStaysSeekable: a store under the retry layer gets a body
// it can seek, within what the caller gave, when the caller's can.
func TestSeekableBodyStaysSeekable(t *testing.T) {
	inner := &readsTwice{Store: mem.New()}
	s := retry.New(inner, retry.Options{Attempts: 2, Logger: quiet()})
	r := strings.NewReader("skip:the body")
	r.Seek(5, io.SeekStart)
	if err := s.Put(t.Context(), "k", r, 8); err != nil {
		t.Fatal(err)
	}
	if !inner.seekable {
		t.Fatal("the inner store got a body that can't seek")
	}
	if inner.under != io.Reader(r) {
		t.Errorf("the body under the attempt is %T, not the caller's", inner.under)
	}
	inner.Store.Get(t.Context(), "k", func(r io.Reader) error {
		if b, _ := io.ReadAll(r); string(b) != "the body" {
			t.Errorf("stored %q, want %q", b, "the body")
		}
		return nil
	})
	only := onlyReader{strings.NewReader("x")}
	if err := s.Put(t.Context(), "k", only, 1); err != nil || inner.seekable {
		t.Errorf("a body that can't seek: Put = %v, seekable below = %v", err, inner.seekable)
	}
	if inner.under == io.Reader(only) {
		t.Error("a body kept for replay unwraps to the caller's, which a store would read past the copy")
	}
}
