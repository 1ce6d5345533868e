package blobtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"lockstep/storage/blob"
)

// canceledContext returns a context that is already canceled.
func canceledContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

func testCanceled(t *testing.T, s blob.Store) {
	put(t, s, "c/present", data(1, 100))
	ctx := canceledContext(t)
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context = %v, want context.Canceled", op, err)
		}
	}
	check("Put", s.Put(ctx, "c/new", strings.NewReader("x"), 1))
	called := false
	check("Get", s.Get(ctx, "c/present", func(io.Reader) error { called = true; return nil }))
	_, err := s.Stat(ctx, "c/present")
	check("Stat", err)
	check("Delete", s.Delete(ctx, "c/present"))
	check("List", s.List(ctx, "", func(blob.Info) error { called = true; return nil }))
	if c, ok := s.(blob.Creator); ok {
		check("Create", c.Create(ctx, "c/created", strings.NewReader("x"), 1))
	}
	if b, ok := s.(blob.Batcher); ok {
		check("PutUnsynced", b.PutUnsynced(ctx, "c/unsynced", strings.NewReader("x"), 1))
		check("Sync", b.Sync(ctx))
	}
	if called {
		t.Error("a callback ran under a canceled context")
	}
	checkBlob(t, s, "c/present", data(1, 100))
	for _, k := range []string{"c/new", "c/created", "c/unsynced"} {
		checkMissing(t, s, k)
	}
}

// cancelingReader yields n bytes of data, canceling its context after the
// first read.
type cancelingReader struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c *cancelingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), 64<<10)])
	c.cancel()
	return n, err
}

func testCancelDuringPut(t *testing.T, s blob.Store) {
	b := data(1, 1<<20)
	for _, size := range []int64{int64(len(b)), -1} {
		ctx, cancel := context.WithCancel(t.Context())
		err := s.Put(ctx, "c/put", &cancelingReader{bytes.NewReader(b), cancel}, size)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Put canceled midway (size %d) = %v, want context.Canceled", size, err)
		}
		checkMissing(t, s, "c/put")
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("canceled Puts left %q", got)
	}
}

func testCancelDuringGet(t *testing.T, s blob.Store) {
	put(t, s, "c/get", data(1, 1<<20))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := s.Get(ctx, "c/get", func(r io.Reader) error {
		if _, err := io.ReadFull(r, make([]byte, 1)); err != nil {
			return err
		}
		cancel()
		_, err := io.ReadAll(r)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Get canceled midway = %v, want context.Canceled", err)
	}
}

func testGetFnError(t *testing.T, s blob.Store) {
	put(t, s, "f", data(1, 100))
	errFn := errors.New("callback failed")
	if err := s.Get(t.Context(), "f", func(io.Reader) error { return errFn }); !errors.Is(err, errFn) {
		t.Fatalf("Get = %v, want fn's error", err)
	}
	// fn may fail after reading part of the blob.
	err := s.Get(t.Context(), "f", func(r io.Reader) error {
		_, _ = io.ReadFull(r, make([]byte, 10))
		return errFn
	})
	if !errors.Is(err, errFn) {
		t.Fatalf("Get = %v, want fn's error", err)
	}
	checkBlob(t, s, "f", data(1, 100))
}

// failingReader yields n bytes then fails with err.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

var errReader = errors.New("reader broke")

func testFailingReader(t *testing.T, s blob.Store) {
	writers := map[string]func(key string, r io.Reader, size int64) error{
		"Put": func(key string, r io.Reader, size int64) error { return s.Put(t.Context(), key, r, size) },
	}
	if c, ok := s.(blob.Creator); ok {
		writers["Create"] = func(key string, r io.Reader, size int64) error { return c.Create(t.Context(), key, r, size) }
	}
	if b, ok := s.(blob.Batcher); ok {
		writers["PutUnsynced"] = func(key string, r io.Reader, size int64) error { return b.PutUnsynced(t.Context(), key, r, size) }
	}
	old := data(9, 5000)
	for name, write := range writers {
		for _, n := range []int{0, 100 << 10} {
			for _, size := range []int64{int64(n) + 1000, -1} {
				err := write("r/new", &failingReader{bytes.NewReader(data(1, n)), errReader}, size)
				if !errors.Is(err, errReader) {
					t.Fatalf("%s of a reader failing after %d bytes (size %d) = %v, want its error", name, n, size, err)
				}
				checkMissing(t, s, "r/new")
				if name == "Create" {
					continue // Create never replaces.
				}
				put(t, s, "r/old", old)
				err = write("r/old", &failingReader{bytes.NewReader(data(1, n)), errReader}, size)
				if !errors.Is(err, errReader) {
					t.Fatalf("%s over an old blob with a failing reader = %v, want its error", name, err)
				}
				checkBlob(t, s, "r/old", old)
				if err := s.Delete(t.Context(), "r/old"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("failed writes left %q", got)
	}
}

func testSizeMismatch(t *testing.T, s blob.Store) {
	const n = 4096
	b := data(1, n)
	for _, size := range []int64{0, n - 1, n + 1, 2 * n} {
		err := s.Put(t.Context(), "m", bytes.NewReader(b), size)
		if !errors.Is(err, blob.ErrSizeMismatch) {
			t.Fatalf("Put of %d bytes declared as %d = %v, want ErrSizeMismatch", n, size, err)
		}
		checkMissing(t, s, "m")
		if c, ok := s.(blob.Creator); ok {
			err := c.Create(t.Context(), "m", bytes.NewReader(b), size)
			if !errors.Is(err, blob.ErrSizeMismatch) {
				t.Fatalf("Create of %d bytes declared as %d = %v, want ErrSizeMismatch", n, size, err)
			}
			checkMissing(t, s, "m")
		}
	}
	if err := s.Put(t.Context(), "m", bytes.NewReader(b), n); err != nil {
		t.Fatalf("Put of %d bytes declared as %d: %v", n, n, err)
	}
	checkBlob(t, s, "m", b)
	// A mismatched overwrite keeps the old blob.
	if err := s.Put(t.Context(), "m", bytes.NewReader(data(2, n)), n+1); !errors.Is(err, blob.ErrSizeMismatch) {
		t.Fatalf("short overwrite = %v, want ErrSizeMismatch", err)
	}
	checkBlob(t, s, "m", b)
}
