package sized_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/sized"
)

func TestSizeBoundaries(t *testing.T) {
	const n = 1000
	data := bytes.Repeat([]byte("x"), n)
	for _, tc := range []struct {
		have, size int64
		ok         bool
	}{
		{n, n, true}, {n, n - 1, false}, {n, n + 1, false},
		{0, 0, true}, {1, 0, false}, {0, 1, false},
		{n, -1, true}, {0, -1, true},
	} {
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"plain":   func(r io.Reader) io.Reader { return r },
			"onebyte": iotest.OneByteReader,
			"dataerr": iotest.DataErrReader,
		} {
			r := sized.NewReader(context.Background(), wrap(bytes.NewReader(data[:tc.have])), tc.size)
			got, err := io.ReadAll(r)
			if tc.ok {
				if err != nil || int64(len(got)) != tc.have || r.N() != tc.have || r.Err() != nil {
					t.Errorf("%s: %d bytes as %d: got %d, %v", name, tc.have, tc.size, len(got), err)
				}
				continue
			}
			if !errors.Is(err, blob.ErrSizeMismatch) || !errors.Is(r.Err(), blob.ErrSizeMismatch) {
				t.Errorf("%s: %d bytes as %d: err %v, want ErrSizeMismatch", name, tc.have, tc.size, err)
			}
			if int64(len(got)) > tc.size {
				t.Errorf("%s: %d bytes as %d: passed on %d bytes", name, tc.have, tc.size, len(got))
			}
			if _, err2 := r.Read(make([]byte, 10)); !errors.Is(err2, blob.ErrSizeMismatch) {
				t.Errorf("%s: error not sticky: %v", name, err2)
			}
		}
	}
}

func TestContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := sized.NewReader(ctx, strings.NewReader("hello world"), -1)
	buf := make([]byte, 5)
	if n, err := r.Read(buf); n != 5 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	cancel()
	if _, err := r.Read(buf); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel = %v", err)
	}
	if !errors.Is(r.Err(), context.Canceled) {
		t.Fatalf("Err = %v", r.Err())
	}
}

func TestUnderlyingError(t *testing.T) {
	errBoom := errors.New("boom")
	r := sized.NewReader(context.Background(), iotest.ErrReader(errBoom), 10)
	if _, err := io.ReadAll(r); !errors.Is(err, errBoom) || !errors.Is(r.Err(), errBoom) {
		t.Fatalf("ReadAll = %v, Err = %v", err, r.Err())
	}
}

// emptyReads returns (0, nil) forever.
type emptyReads struct{}

func (emptyReads) Read([]byte) (int, error) { return 0, nil }

func TestProbeNoProgress(t *testing.T) {
	r := sized.NewReader(context.Background(), io.MultiReader(strings.NewReader("ab"), emptyReads{}), 2)
	if _, err := io.ReadAll(r); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("ReadAll = %v, want io.ErrNoProgress", err)
	}
}
