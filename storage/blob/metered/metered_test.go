package metered_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/storage/blob/mem"
	"lockstep/storage/blob/metered"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(*testing.T) blob.Store { return metered.New(mem.New(), metered.NewMeter()) })
}

// TestCountsExact makes a known sequence of calls and checks every count.
func TestCountsExact(t *testing.T) {
	ctx := t.Context()
	m := metered.NewMeter()
	s := metered.New(mem.New(), m)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put(ctx, "a", strings.NewReader("hello"), 5))                                 // PUT 5
	must(s.(blob.Creator).Create(ctx, "b", strings.NewReader("abc"), 3))                 // PUT 3
	must(s.(blob.Batcher).PutUnsynced(ctx, "c", bytes.NewReader(make([]byte, 100)), -1)) // PUT 100
	must(s.(blob.Batcher).Sync(ctx))                                                     // not counted
	if err := s.(blob.Creator).Create(ctx, "b", strings.NewReader("x"), 1); !errors.Is(err, blob.ErrExist) {
		t.Fatal(err) // PUT, an answer, not an error
	}
	if err := s.Put(ctx, "d", strings.NewReader("xy"), 3); !errors.Is(err, blob.ErrSizeMismatch) {
		t.Fatal(err) // PUT of 2 bytes read, an error
	}
	read := func(r io.Reader) error { _, err := io.ReadAll(r); return err }
	must(s.Get(ctx, "a", read))                                                                      // GET 5
	must(s.(blob.RangeReader).GetRange(ctx, "c", 10, 20, read))                                      // GET 20
	must(s.Get(ctx, "c", func(r io.Reader) error { _, err := r.Read(make([]byte, 7)); return err })) // GET 7
	if err := s.Get(ctx, "nope", read); !errors.Is(err, blob.ErrNotExist) {                          // GET, an answer
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.Get(ctx, "a", func(io.Reader) error { return boom }); !errors.Is(err, boom) { // GET, fn's error
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "a"); err != nil { // HEAD
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "Bad"); !errors.Is(err, blob.ErrInvalidKey) { // HEAD, an error
		t.Fatal(err)
	}
	must(s.List(ctx, "", func(blob.Info) error { return nil }))                     // LIST
	if err := s.List(ctx, "", func(blob.Info) error { return boom }); err != boom { // LIST, fn's error
		t.Fatal(err)
	}
	must(s.Delete(ctx, "a"))                                          // DELETE
	if err := s.Delete(ctx, "a"); !errors.Is(err, blob.ErrNotExist) { // DELETE, an answer
		t.Fatal(err)
	}

	got := m.Snapshot()
	want := metered.Snapshot{
		Since:  got.Since,
		Put:    metered.Counts{Requests: 5, Errors: 1, Bytes: 5 + 3 + 100 + 1 + 2},
		Get:    metered.Counts{Requests: 5, Errors: 0, Bytes: 5 + 20 + 7},
		Head:   metered.Counts{Requests: 2, Errors: 1},
		List:   metered.Counts{Requests: 2},
		Delete: metered.Counts{Requests: 2},
	}
	if got != want {
		t.Errorf("Snapshot\n got %+v\nwant %+v", got, want)
	}
	if got.Since.IsZero() {
		t.Error("Snapshot.Since is zero")
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"since":`, `"put":{"requests":5,"errors":1,"bytes":111}`, `"head":`, `"delete":`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("JSON %s lacks %s", b, field)
		}
	}
	if metered.Of(s) != m {
		t.Error("Of does not find the meter")
	}
	if metered.Of(mem.New()) != nil {
		t.Error("Of finds a meter in a plain store")
	}
}

// TestConcurrentCounts counts calls from many goroutines (run with -race).
func TestConcurrentCounts(t *testing.T) {
	m := metered.NewMeter()
	s := metered.New(mem.New(), m)
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				key := string(rune('a'+w)) + "/k"
				if err := s.Put(t.Context(), key, strings.NewReader("0123456789"), 10); err != nil {
					t.Error(err)
				}
				_ = m.Snapshot()
			}
		})
	}
	wg.Wait()
	if got := m.Snapshot().Put; got.Requests != workers*each || got.Bytes != 10*workers*each {
		t.Errorf("PUT counts %+v, want %d requests of 10 bytes", got, workers*each)
	}
}
