package blobtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"lockstep/storage/blob"
)

func testConcurrentPuts(t *testing.T, s blob.Store) {
	const writers, each = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("p/%d/%02d", w, i)
				b := data(uint64(w*each+i), 1000+w*100+i)
				errs <- s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Put: %v", err)
		}
	}
	keys := listKeys(t, s, "p/")
	if len(keys) != writers*each {
		t.Fatalf("List after concurrent Puts = %d keys, want %d", len(keys), writers*each)
	}
	for w := range writers {
		for i := range each {
			checkBlob(t, s, fmt.Sprintf("p/%d/%02d", w, i), data(uint64(w*each+i), 1000+w*100+i))
		}
	}
}

// uniform returns n bytes of value v: a torn blob would mix two values.
func uniform(v byte, n int) []byte { return bytes.Repeat([]byte{v}, n) }

// testConcurrentOverwrite has writers replace one key while readers check
// that every read sees one whole version.
func testConcurrentOverwrite(t *testing.T, s blob.Store) {
	const n = 256 << 10
	put(t, s, "o", uniform(0, n))
	var writers, readers sync.WaitGroup
	var done atomic.Bool
	var failed atomic.Value
	fail := func(err error) { failed.CompareAndSwap(nil, err) }
	for w := range 3 {
		writers.Go(func() {
			for i := range 8 {
				v := byte(1 + w*8 + i)
				if err := s.Put(t.Context(), "o", bytes.NewReader(uniform(v, n)), n); err != nil {
					fail(fmt.Errorf("Put: %w", err))
				}
			}
		})
	}
	var reads atomic.Int64
	for range 3 {
		readers.Go(func() {
			for !done.Load() || reads.Load() == 0 {
				err := s.Get(t.Context(), "o", func(r io.Reader) error {
					b, err := io.ReadAll(r)
					if err != nil {
						return err
					}
					if len(b) != n || !bytes.Equal(b, uniform(b[0], n)) {
						return fmt.Errorf("read a torn blob of %d bytes", len(b))
					}
					return nil
				})
				reads.Add(1)
				if err != nil {
					fail(fmt.Errorf("Get: %w", err))
					return
				}
			}
		})
	}
	writers.Wait()
	done.Store(true)
	readers.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	b := get(t, s, "o")
	if len(b) != n || !bytes.Equal(b, uniform(b[0], n)) || b[0] == 0 {
		t.Fatalf("final blob is not one of the writers' versions")
	}
}

func testCreate(t *testing.T, s blob.Store) {
	c, ok := s.(blob.Creator)
	if !ok {
		t.Skip("store does not implement blob.Creator")
	}
	first := data(1, 300)
	if err := c.Create(t.Context(), "e/env", bytes.NewReader(first), int64(len(first))); err != nil {
		t.Fatalf("Create: %v", err)
	}
	checkBlob(t, s, "e/env", first)
	for _, size := range []int64{10, -1} {
		err := c.Create(t.Context(), "e/env", strings.NewReader("0123456789"), size)
		if !errors.Is(err, blob.ErrExist) || !errors.Is(err, fs.ErrExist) {
			t.Fatalf("Create of an existing key (size %d) = %v, want ErrExist", size, err)
		}
	}
	checkBlob(t, s, "e/env", first)
	// Put still replaces; Create after Delete creates.
	put(t, s, "e/env", data(2, 10))
	checkBlob(t, s, "e/env", data(2, 10))
	if err := s.Delete(t.Context(), "e/env"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), "e/env", struct{ io.Reader }{strings.NewReader("again")}, -1); err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
	checkBlob(t, s, "e/env", []byte("again"))
	// Empty and sharded-looking keys.
	if err := c.Create(t.Context(), "e/0123456789abcdef", bytes.NewReader(nil), 0); err != nil {
		t.Fatalf("Create of an empty blob: %v", err)
	}
	checkBlob(t, s, "e/0123456789abcdef", nil)
}

func testCreateConcurrent(t *testing.T, s blob.Store) {
	c, ok := s.(blob.Creator)
	if !ok {
		t.Skip("store does not implement blob.Creator")
	}
	for round := range 3 {
		key := fmt.Sprintf("log/%08d", round)
		const racers = 8
		var wg sync.WaitGroup
		errs := make([]error, racers)
		for i := range racers {
			wg.Go(func() {
				b := uniform(byte(i+1), 64<<10)
				errs[i] = c.Create(t.Context(), key, bytes.NewReader(b), int64(len(b)))
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("%s: racers %d and %d both created it", key, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, blob.ErrExist):
				t.Fatalf("%s: racer %d: %v, want ErrExist", key, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no racer created it", key)
		}
		checkBlob(t, s, key, uniform(byte(winner+1), 64<<10))
	}
}

func testBatcher(t *testing.T, s blob.Store) {
	b, ok := s.(blob.Batcher)
	if !ok {
		t.Skip("store does not implement blob.Batcher")
	}
	if err := b.Sync(t.Context()); err != nil {
		t.Fatalf("Sync with nothing written: %v", err)
	}
	for batch := range 3 {
		for i := range 10 {
			key := fmt.Sprintf("chunks/%02x%04x", batch, i)
			v := data(uint64(batch*10+i), 1000*i)
			if err := b.PutUnsynced(t.Context(), key, bytes.NewReader(v), int64(len(v))); err != nil {
				t.Fatalf("PutUnsynced: %v", err)
			}
			checkBlob(t, s, key, v) // visible before Sync
		}
		if err := b.Sync(t.Context()); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	// Overwrite and delete unsynced blobs before a Sync.
	if err := b.PutUnsynced(t.Context(), "chunks/000000", strings.NewReader("new"), -1); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), "chunks/000001"); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(t.Context()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	checkBlob(t, s, "chunks/000000", []byte("new"))
	if n := len(listKeys(t, s, "chunks/")); n != 29 {
		t.Fatalf("List after batches = %d keys, want 29", n)
	}
}
