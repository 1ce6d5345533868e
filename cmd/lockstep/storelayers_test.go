package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"lockstep/storage/blob"
	"lockstep/storage/blob/local"
	"lockstep/storage/blob/mem"
	"lockstep/storage/blob/retry"
	"lockstep/test/testutil"
)

func TestByteRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1048576", 1 << 20}, {"10MiB", 10 << 20}, {"10mib", 10 << 20}, {"512KiB", 512 << 10},
		{"1.5GiB", 3 << 29}, {"2MB", 2e6}, {"100kB", 1e5}, {"7B", 7}, {" 3 MiB ", 3 << 20},
	} {
		var b byteRate
		if err := b.Set(tc.in); err != nil || int64(b) != tc.want {
			t.Errorf("Set(%q) = %d, %v; want %d", tc.in, b, err, tc.want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "ten", "1XB", "NaN", "1e30GiB"} {
		var b byteRate
		if err := b.Set(bad); err == nil {
			t.Errorf("Set(%q) = %d, want an error", bad, b)
		}
	}
	if b := byteRate(10 << 20); b.String() != "10MiB" {
		t.Errorf("String = %q", b.String())
	}
}

func TestStoreLayerFlags(t *testing.T) {
	var o storeLayerOptions
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addStoreLayerFlags(fs, &o)
	if o.Retries != defaultStoreRetries || o.Concurrency != 0 {
		t.Errorf("defaults %+v", o)
	}
	err := fs.Parse([]string{"--store-concurrency", "8", "--store-upload-limit", "10MiB", "--store-download-limit=1MB", "--store-retries", "0"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Concurrency != 8 || o.UploadLimit != 10<<20 || o.DownloadLimit != 1e6 || o.Retries != 0 {
		t.Errorf("parsed %+v", o)
	}
	if err := fs.Parse([]string{"--store-upload-limit", "lots"}); err == nil {
		t.Error("a bad size was accepted")
	}
}

// failOnce fails its first Stat with a reset connection.
type failOnce struct {
	*mem.Store
	failed atomic.Bool
}

var errFailOnce = errors.New("read tcp: connection reset by peer")

func (f *failOnce) Stat(ctx context.Context, key string) (blob.Info, error) {
	if f.failed.CompareAndSwap(false, true) {
		return blob.Info{}, errFailOnce
	}
	return f.Store.Stat(ctx, key)
}

func TestLayerStore(t *testing.T) {
	rec := &testutil.LogRecorder{} // logs debug records: the logged layer is on
	inner := &failOnce{Store: mem.New()}
	o := storeLayerOptions{Concurrency: 2, UploadLimit: 1 << 30, Retries: 2, Logger: slog.New(rec)}
	s := layerStore(inner, o, func(err error) bool { return errors.Is(err, errFailOnce) })
	for _, ok := range []bool{is[blob.Creator](s), is[blob.Batcher](s), is[blob.RangeReader](s)} {
		if !ok {
			t.Fatal("the layers hide an ability of the store")
		}
	}
	if err := s.Put(t.Context(), "k", strings.NewReader("hello"), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(t.Context(), "k"); err != nil {
		t.Fatalf("Stat failing once, with retries: %v", err)
	}
	u, ok := storeUsage(s)
	if !ok {
		t.Fatal("storeUsage finds no meter")
	}
	if u.Put.Requests != 1 || u.Put.Bytes != 5 || u.Head.Requests != 2 || u.Head.Errors != 1 {
		t.Errorf("usage %+v, want 1 PUT of 5 bytes and 2 HEADs (one attempt failed)", u)
	}
	if n := rec.Count(slog.LevelWarn, "blob store call failed, retrying"); n != 1 {
		t.Errorf("%d retries logged, want 1", n)
	}
	if n := rec.Count(slog.LevelDebug, "blob store call"); n != 2 {
		t.Errorf("%d calls logged at debug, want 2", n)
	}

	// Without a classifier (a local store) nothing is retried; with an
	// info logger nothing is logged per call.
	rec = &testutil.LogRecorder{}
	s = layerStore(&failOnce{Store: mem.New()}, storeLayerOptions{Retries: 2, Logger: slog.New(infoOnly{rec})}, nil)
	if _, err := s.Stat(t.Context(), "k"); !errors.Is(err, errFailOnce) {
		t.Errorf("Stat without retries = %v, want the failure", err)
	}
	if n := rec.CountLevel(slog.LevelDebug); n != 0 {
		t.Errorf("%d debug records with debug off", n)
	}
	if _, ok := storeUsage(mem.New()); ok {
		t.Error("storeUsage of a bare store")
	}
}

// TestLayerStoreKeepsClean: the receiver removes a local store's stale
// temporary files through its Clean method, found by type assertion.
func TestLayerStoreKeepsClean(t *testing.T) {
	st, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := storeLayerOptions{Concurrency: 1, Retries: 1, Logger: slog.New(&testutil.LogRecorder{})}
	s := layerStore(st, o, func(error) bool { return true })
	c, ok := s.(interface {
		Clean(ctx context.Context, before time.Time) (int, error)
	})
	if !ok {
		t.Fatal("the layers hide local.Store's Clean")
	}
	if _, err := c.Clean(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
}

type infoOnly struct{ *testutil.LogRecorder }

func (infoOnly) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func is[T any](s blob.Store) bool {
	_, ok := s.(T)
	return ok
}

// putFailsOnce fails its first Put after reading the whole body, as a
// connection reset at the end of an upload does.
type putFailsOnce struct {
	*mem.Store
	failed atomic.Bool
}

func (f *putFailsOnce) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if f.failed.CompareAndSwap(false, true) {
		io.Copy(io.Discard, r)
		return errFailOnce
	}
	return f.Store.Put(ctx, key, r, size)
}

// TestLayerStoreRetriesLargeBodies: with debug logging on, the logged
// layer's count of a body hid that it could seek, so the retry layer under
// it kept a copy of every body and could not retry one larger than its
// buffer.
func TestLayerStoreRetriesLargeBodies(t *testing.T) {
	inner := &putFailsOnce{Store: mem.New()}
	o := storeLayerOptions{Retries: 2, Logger: slog.New(&testutil.LogRecorder{})}
	s := layerStore(inner, o, func(err error) bool { return errors.Is(err, errFailOnce) })
	body := bytes.Repeat([]byte("0123456789abcdef"), (retry.DefaultBuffer+1<<20)/16)
	if err := s.Put(t.Context(), "k", bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatalf("Put of %d bytes failing once: %v", len(body), err)
	}
	if err := s.Get(t.Context(), "k", func(r io.Reader) error {
		got, err := io.ReadAll(r)
		if err == nil && !bytes.Equal(got, body) {
			err = errors.New("stored bytes differ from the body")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
