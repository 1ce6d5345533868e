package limit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/storage/blob/limit"
	"lockstep/storage/blob/mem"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestConformance runs the suite with one slot, so that a callback calling
// the store (List deleting) would deadlock if List kept its slot.
func TestConformance(t *testing.T) {
	blobtest.Run(t, func(*testing.T) blob.Store {
		return limit.New(mem.New(), limit.Options{Concurrency: 1, Upload: 1 << 30, Download: 1 << 30})
	})
}

// probe is a mem.Store that records how many calls are in it at once.
type probe struct {
	*mem.Store
	now, max atomic.Int64
}

func (p *probe) enter() func() {
	n := p.now.Add(1)
	for {
		m := p.max.Load()
		if n <= m || p.max.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond)
	return func() { p.now.Add(-1) }
}

func (p *probe) Put(ctx context.Context, k string, r io.Reader, n int64) error {
	defer p.enter()()
	return p.Store.Put(ctx, k, r, n)
}

func (p *probe) Get(ctx context.Context, k string, fn func(io.Reader) error) error {
	defer p.enter()()
	return p.Store.Get(ctx, k, fn)
}

func (p *probe) Stat(ctx context.Context, k string) (blob.Info, error) {
	defer p.enter()()
	return p.Store.Stat(ctx, k)
}

// List counts as in the store except while its callback runs, when the
// limit gives its slot back.
func (p *probe) List(ctx context.Context, pre string, fn func(blob.Info) error) error {
	leave := p.enter()
	defer func() { leave() }()
	return p.Store.List(ctx, pre, func(info blob.Info) error {
		leave()
		err := fn(info)
		leave = p.enter()
		return err
	})
}

// TestInFlightBound runs 16 workers of mixed calls through 3 slots and
// checks that at most 3, and at some point exactly 3, were in the store.
func TestInFlightBound(t *testing.T) {
	const slots, workers, each = 3, 16, 12
	p := &probe{Store: mem.New()}
	s := limit.New(p, limit.Options{Concurrency: slots})
	var inFn, maxInFn atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := t.Context()
			for i := range each {
				key := fmt.Sprintf("w%d/%d", w, i)
				var err error
				switch i % 4 {
				case 0:
					err = s.Put(ctx, key, strings.NewReader("data"), 4)
				case 1:
					err = s.Get(ctx, fmt.Sprintf("w%d/%d", w, i-1), func(r io.Reader) error {
						n := inFn.Add(1)
						defer inFn.Add(-1)
						if n > maxInFn.Load() {
							maxInFn.Store(n)
						}
						time.Sleep(time.Millisecond) // the slot is held meanwhile
						_, err := io.ReadAll(r)
						return err
					})
				case 2:
					_, err = s.Stat(ctx, fmt.Sprintf("w%d/%d", w, i-2))
				case 3:
					err = s.List(ctx, fmt.Sprintf("w%d/", w), func(blob.Info) error { return nil })
				}
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := p.max.Load(); got != slots {
		t.Errorf("at most %d calls were in the store at once, want exactly %d", got, slots)
	}
	if got := maxInFn.Load(); got > slots {
		t.Errorf("%d Get callbacks ran at once, more than %d slots", got, slots)
	}
}

func TestUploadBandwidth(t *testing.T) {
	// 64 KiB/s with a burst of 16 KiB: 48 KiB take at least 0.5 s.
	s := limit.New(mem.New(), limit.Options{Upload: 64 << 10})
	start := time.Now()
	b := make([]byte, 48<<10)
	if err := s.Put(t.Context(), "up", bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 5*time.Second {
		t.Errorf("48 KiB at 64 KiB/s took %v, want about 0.5 s", d)
	}
	// Downloads are not limited.
	start = time.Now()
	if err := s.Get(t.Context(), "up", func(r io.Reader) error { _, err := io.ReadAll(r); return err }); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("an unlimited Get took %v", d)
	}
}

func TestDownloadBandwidth(t *testing.T) {
	inner := mem.New()
	b := make([]byte, 48<<10)
	if err := inner.Put(t.Context(), "down", bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	s := limit.New(inner, limit.Options{Download: 64 << 10})
	start := time.Now()
	var got int
	err := blob.GetRange(t.Context(), s, "down", 0, 1<<20, func(r io.Reader) error {
		b, err := io.ReadAll(r)
		got = len(b)
		return err
	})
	if err != nil || got != len(b) {
		t.Fatalf("GetRange: %d bytes, %v", got, err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 5*time.Second {
		t.Errorf("48 KiB at 64 KiB/s took %v, want about 0.5 s", d)
	}
}

// TestCancelWhileWaiting: a call waiting for a slot, or for bandwidth,
// gives up when its context is done.
func TestCancelWhileWaiting(t *testing.T) {
	s := limit.New(mem.New(), limit.Options{Concurrency: 1, Upload: 1 << 10})
	if err := s.Put(t.Context(), "k", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	hold, held := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		s.Get(t.Context(), "k", func(io.Reader) error { close(held); <-hold; return nil })
	})
	<-held
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Stat(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stat waiting for a slot = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Stat gave up after %v", d)
	}
	close(hold)
	wg.Wait()

	// 1 KiB/s: 64 KiB would take a minute.
	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	if err := s.Put(ctx, "big", bytes.NewReader(make([]byte, 64<<10)), 64<<10); !errors.Is(err, context.Canceled) {
		t.Errorf("Put waiting for bandwidth = %v, want Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Put gave up after %v", d)
	}
	if _, err := s.Stat(t.Context(), "big"); !errors.Is(err, blob.ErrNotExist) {
		t.Errorf("a canceled Put left a blob: %v", err)
	}
}

// innermost records the body under the wrappers of each body it is given.
type innermost struct {
	*mem.Store
	got io.Reader
}

func (s *innermost) Put(ctx context.Context, k string, r io.Reader, n int64) error {
	s.got = blob.InnermostBody(r)
	return s.Store.Put(ctx, k, r, n)
}

// TestPacedBodyUnwraps: the paced body a store is given unwraps to the
// caller's, so a store that reads a body before sending it (S3's
// checksum) reads it unpaced and sends it paced.
func TestPacedBodyUnwraps(t *testing.T) {
	in := &innermost{Store: mem.New()}
	s := limit.New(in, limit.Options{Upload: 1 << 20})
	body := strings.NewReader("paced")
	if err := s.Put(t.Context(), "k", body, 5); err != nil {
		t.Fatal(err)
	}
	if in.got != io.Reader(body) {
		t.Fatalf("the body under the paced one is %T, not the caller's", in.got)
	}
}
