package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lockstep/storage/blob"
	"lockstep/test/testutil"
)

// faultyStore is a real store that fails every call with err while err
// is set: it stands for a full disk or a bucket that cannot be reached.
type faultyStore struct {
	blob.Store
	mu  sync.Mutex
	err error
}

func (s *faultyStore) fail(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *faultyStore) failure(op, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("%s %s: %w", op, key, s.err)
	}
	return nil
}

func (s *faultyStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.failure("put", key); err != nil {
		return err
	}
	return s.Store.Put(ctx, key, r, size)
}

func (s *faultyStore) Get(ctx context.Context, key string, fn func(io.Reader) error) error {
	if err := s.failure("get", key); err != nil {
		return err
	}
	return s.Store.Get(ctx, key, fn)
}

func (s *faultyStore) Stat(ctx context.Context, key string) (blob.Info, error) {
	if err := s.failure("stat", key); err != nil {
		return blob.Info{}, err
	}
	return s.Store.Stat(ctx, key)
}

func (s *faultyStore) Delete(ctx context.Context, key string) error {
	if err := s.failure("delete", key); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key)
}

func (s *faultyStore) List(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	if err := s.failure("list", prefix); err != nil {
		return err
	}
	return s.Store.List(ctx, prefix, fn)
}

func (s *faultyStore) PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.failure("put", key); err != nil {
		return err
	}
	return s.Store.(blob.Batcher).PutUnsynced(ctx, key, r, size)
}

func (s *faultyStore) Sync(ctx context.Context) error {
	if err := s.failure("sync", ""); err != nil {
		return err
	}
	return s.Store.(blob.Batcher).Sync(ctx)
}

// TestIngestRetriesStoreErrors: while the store fails, the ingest keeps
// the peer's messages unacknowledged, the folder's status says why, and
// once the store works again every record is stored and acknowledged, by
// the same connection, and the status is clear.
func TestIngestRetriesStoreErrors(t *testing.T) {
	ctx := context.Background()
	store := &faultyStore{Store: localStore(t)}
	p := newTrusted()
	n := newNode(t, store, p.id)
	sharing(t, n, p)
	big := func() []byte { return p.addChunk(defaultPackBelow + 1) }

	p.send(t, record(p, 1, 1, big(), p.addChunk(100)))
	testutil.Eventually(t, waitTimeout, "ack of 1", func() bool { return p.lastAck() == 1 })

	store.fail(syscall.ENOSPC)
	p.send(t, record(p, 2, 2, big(), p.addChunk(100)), record(p, 3, 3, big()))
	p.send(t, record(p, 4, 4, p.addChunk(100)))
	testutil.Eventually(t, waitTimeout, "the folder's status to show the store's error", func() bool {
		_, err := n.r.Status(ctx, folderID)
		return err != nil && strings.Contains(err.Error(), syscall.ENOSPC.Error())
	})
	st, err := n.r.Status(ctx, folderID)
	var se *StoreError
	if st.Records != 1 || !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrCannotStore) ||
		!errors.As(err, &se) || se.Device != p.id {
		t.Fatalf("status while the store fails: %+v, %v; want 1 record and the store's error naming the peer", st, err)
	}
	if got := p.lastAck(); got != 1 {
		t.Fatalf("acknowledged up to %d while the store fails, want 1", got)
	}
	// The peer heard why: its status shows the reason.
	testutil.Eventually(t, waitTimeout, "the peer told why nothing is stored", func() bool {
		errs := p.ackErrors()
		return len(errs) > 0 && strings.Contains(errs[0], syscall.ENOSPC.Error())
	})

	store.fail(nil)
	testutil.Eventually(t, waitTimeout, "ack of 4", func() bool { return p.lastAck() == 4 })
	if st, err := n.r.Status(ctx, folderID); err != nil || st.Records != 4 {
		t.Fatalf("status once the store works: %+v, %v; want 4 records, no error", st, err)
	}
	// The link goes on: the log comes back, new records are stored.
	p.send(t, record(p, 5, 5, big()))
	testutil.Eventually(t, waitTimeout, "ack of 5", func() bool { return p.lastAck() == 5 })
	testutil.Eventually(t, waitTimeout, "the log sent back", func() bool { return len(p.received()) == 5 })
	for i, w := range p.received() {
		if w.GetCounter() != uint64(i+1) {
			t.Fatalf("log sent back: record %d has counter %d", i, w.GetCounter())
		}
	}
	if recs := n.records(t); len(recs) != 5 {
		t.Fatalf("%d records held, want 5", len(recs))
	}
}

// TestIngestPeerErrorEndsLink: a chunk the peer fails to serve for a
// reason other than lacking it is the peer's fault, as before: the ingest
// of that connection ends, and nothing is reported as the store's.
func TestIngestPeerErrorEndsLink(t *testing.T) {
	ctx := context.Background()
	p := newTrusted()
	n := newNode(t, localStore(t), p.id)
	recv := sharing(t, n, p)
	p.mu.Lock()
	p.failure = errors.New("input/output error")
	p.mu.Unlock()
	p.send(t, record(p, 1, 1, p.addChunk(100)))
	testutil.Eventually(t, waitTimeout, "the link to end", func() bool {
		l, err := n.r.link(recv.conn, folderID)
		return err == nil && l != nil && l.ctx.Err() != nil
	})
	if st, err := n.r.Status(ctx, folderID); err != nil || st.Records != 0 {
		t.Fatalf("status after a peer's failure: %+v, %v", st, err)
	}
}

// TestBackoff: the waits between retries start at about a second, double,
// stay within a minute, and vary.
func TestBackoff(t *testing.T) {
	var delays []time.Duration
	for d := nextDelay(0); len(delays) == 0 || delays[len(delays)-1] != d; d = nextDelay(d) {
		delays = append(delays, d)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, time.Minute}
	if !slices.Equal(delays, want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	seen := make(map[time.Duration]bool)
	for range 100 {
		w := jitter(time.Minute)
		if w < 30*time.Second || w > time.Minute {
			t.Fatalf("jitter(1m) = %v, want within [30s, 1m]", w)
		}
		seen[w] = true
	}
	if len(seen) < 50 {
		t.Fatalf("jitter(1m) gave %d different waits of 100", len(seen))
	}
}
