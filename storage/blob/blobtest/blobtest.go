// Package blobtest is the conformance suite that every blob.Store
// implementation runs, and benchmarks they share.
//
// Run checks the contract written in package blob: round trips (empty, small
// and 5 MiB blobs, known and unknown sizes), overwrite, not-found errors,
// lexical listing with prefixes, key validation at its boundaries,
// cancellation, failing readers and size mismatches that must leave nothing
// behind, concurrent writers, and the optional Creator, Batcher and RangeReader abilities
// when the store has them.
package blobtest

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"lockstep/storage/blob"
)

// Run runs the conformance suite. newStore must return a new, empty store
// for each call; it is called once per subtest. A store that holds only keys
// shorter than blob.MaxKeyLen (an S3 store under a prefix) says so with a
// method MaxKeyLen() int, and its boundary is tested instead.
func Run(t *testing.T, newStore func(t *testing.T) blob.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s blob.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"Missing", testMissing},
		{"Delete", testDelete},
		{"List", testList},
		{"ListStop", testListStop},
		{"ListDelete", testListDelete},
		{"InvalidKeys", testInvalidKeys},
		{"KeyLimits", testKeyLimits},
		{"Canceled", testCanceled},
		{"CancelDuringPut", testCancelDuringPut},
		{"CancelDuringGet", testCancelDuringGet},
		{"GetFnError", testGetFnError},
		{"FailingReader", testFailingReader},
		{"SizeMismatch", testSizeMismatch},
		{"ConcurrentPuts", testConcurrentPuts},
		{"ConcurrentOverwrite", testConcurrentOverwrite},
		{"Create", testCreate},
		{"CreateConcurrent", testCreateConcurrent},
		{"Batcher", testBatcher},
		{"GetRange", testGetRange},
		{"DeleteBatch", testDeleteBatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// data returns n pseudo-random bytes determined by seed.
func data(seed uint64, n int) []byte {
	var key [32]byte
	key[0] = byte(seed)
	key[1] = byte(seed >> 8)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

func put(t *testing.T, s blob.Store, key string, b []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	var got []byte
	calls := 0
	err := s.Get(t.Context(), key, func(r io.Reader) error {
		calls++
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if calls != 1 {
		t.Fatalf("Get(%q) called fn %d times, want 1", key, calls)
	}
	return got
}

func checkBlob(t *testing.T, s blob.Store, key string, want []byte) {
	t.Helper()
	if got := get(t, s, key); !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %d bytes, want the %d bytes put", key, len(got), len(want))
	}
	info, err := s.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("Stat(%q): %v", key, err)
	}
	if info.Key != key || info.Size != int64(len(want)) {
		t.Fatalf("Stat(%q) = %+v, want key %q size %d", key, info, key, len(want))
	}
	if d := time.Since(info.ModTime); info.ModTime.IsZero() || d > time.Hour || d < -time.Hour {
		t.Fatalf("Stat(%q).ModTime = %v, not near now", key, info.ModTime)
	}
}

func checkMissing(t *testing.T, s blob.Store, key string) {
	t.Helper()
	called := false
	err := s.Get(t.Context(), key, func(io.Reader) error { called = true; return nil })
	if !errors.Is(err, blob.ErrNotExist) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get(%q) = %v, want ErrNotExist", key, err)
	}
	if called {
		t.Fatalf("Get(%q) of a missing blob called fn", key)
	}
	if _, err := s.Stat(t.Context(), key); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("Stat(%q) = %v, want ErrNotExist", key, err)
	}
}

// listKeys returns the keys List reports for prefix, checking their sizes
// against Stat.
func listKeys(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	keys := []string{}
	err := s.List(t.Context(), prefix, func(info blob.Info) error {
		keys = append(keys, info.Key)
		if info.ModTime.IsZero() {
			t.Errorf("List(%q): %q has no ModTime", prefix, info.Key)
		}
		st, err := s.Stat(t.Context(), info.Key)
		if err != nil {
			return err
		}
		if st.Size != info.Size {
			t.Errorf("List(%q): %q has size %d, Stat says %d", prefix, info.Key, info.Size, st.Size)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func testRoundTrip(t *testing.T, s blob.Store) {
	for _, tc := range []struct {
		key string
		n   int
	}{
		{"empty", 0},
		{"one", 1},
		{"small/blob", 1000},
		{"chunks/0123456789abcdef", 256 << 10},
		{"big/five-mib", 5 << 20},
	} {
		b := data(uint64(tc.n), tc.n)
		put(t, s, tc.key, b)
		checkBlob(t, s, tc.key, b)

		// The same with an unknown size, hiding any io.WriterTo or Len.
		key := tc.key + "-unsized"
		if err := s.Put(t.Context(), key, struct{ io.Reader }{bytes.NewReader(b)}, -1); err != nil {
			t.Fatalf("Put(%q, size -1): %v", key, err)
		}
		checkBlob(t, s, key, b)
	}
}

func testOverwrite(t *testing.T, s blob.Store) {
	first, second, third := data(1, 3000), data(2, 100), data(3, 0)
	put(t, s, "k/v", first)
	put(t, s, "k/v", second)
	checkBlob(t, s, "k/v", second)
	put(t, s, "k/v", third)
	checkBlob(t, s, "k/v", third)
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"k/v"}) {
		t.Fatalf("List after overwrites = %q, want one key", got)
	}
}

func testMissing(t *testing.T, s blob.Store) {
	checkMissing(t, s, "missing")
	checkMissing(t, s, "missing/deeper/key")
	put(t, s, "dir/present", data(1, 10))
	checkMissing(t, s, "dir/absent")
	checkMissing(t, s, "dir") // a path prefix is not a blob
	checkMissing(t, s, "dir/present/below")
	if err := s.Delete(t.Context(), "dir"); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("Delete of a path prefix = %v, want ErrNotExist", err)
	}
	checkBlob(t, s, "dir/present", data(1, 10))
}

func testDelete(t *testing.T, s blob.Store) {
	if err := s.Delete(t.Context(), "never"); !errors.Is(err, blob.ErrNotExist) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Delete of a missing blob = %v, want ErrNotExist", err)
	}
	put(t, s, "d/one", data(1, 10))
	put(t, s, "d/two", data(2, 10))
	if err := s.Delete(t.Context(), "d/one"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	checkMissing(t, s, "d/one")
	if err := s.Delete(t.Context(), "d/one"); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("second Delete = %v, want ErrNotExist", err)
	}
	checkBlob(t, s, "d/two", data(2, 10))
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"d/two"}) {
		t.Fatalf("List after Delete = %q", got)
	}
	put(t, s, "d/one", data(3, 5))
	checkBlob(t, s, "d/one", data(3, 5))
}
