package logged_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/storage/blob/logged"
	"lockstep/storage/blob/mem"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(*testing.T) blob.Store {
		return logged.New(mem.New(), slog.New(&testutil.LogRecorder{}))
	})
}

func TestConformanceDebugOff(t *testing.T) {
	blobtest.Run(t, func(*testing.T) blob.Store { return logged.New(mem.New(), slog.New(slog.DiscardHandler)) })
}

// TestOneRecordPerCall checks the record of each kind of call: one, at
// debug, with kind, key, size and duration, and the error when there is one.
func TestOneRecordPerCall(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := logged.New(mem.New(), log)
	ctx := t.Context()
	read := func(r io.Reader) error { _, err := io.ReadAll(r); return err }
	calls := []struct {
		call func() error
		want string
	}{
		{func() error { return s.Put(ctx, "a/b", strings.NewReader("hello"), 5) }, "kind=put key=a/b size=5"},
		{func() error { return s.(blob.Creator).Create(ctx, "c", strings.NewReader("xyz"), -1) }, "kind=create key=c size=3"},
		{func() error { return s.(blob.Batcher).PutUnsynced(ctx, "u", strings.NewReader("1"), 1) }, "kind=put-unsynced key=u size=1"},
		{func() error { return s.(blob.Batcher).Sync(ctx) }, `kind=sync key="" size=0`},
		{func() error { return s.Get(ctx, "a/b", read) }, "kind=get key=a/b size=5"},
		{func() error { return s.(blob.RangeReader).GetRange(ctx, "a/b", 1, 2, read) }, "kind=get-range key=a/b size=2"},
		{func() error { _, err := s.Stat(ctx, "c"); return err }, "kind=stat key=c size=3"},
		{func() error { return s.List(ctx, "a/", func(blob.Info) error { return nil }) }, "kind=list key=a/ size=1"},
		{func() error { return s.Delete(ctx, "c") }, "kind=delete key=c size=0"},
		{func() error { s.Delete(ctx, "c"); return nil }, `kind=delete key=c size=0 duration=`},
	}
	for _, c := range calls {
		buf.Reset()
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.want, err)
		}
		out := buf.String()
		if strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, c.want) || !strings.Contains(out, "duration=") {
			t.Errorf("record %q, want one debug record with %q and a duration", out, c.want)
		}
	}
	if !strings.Contains(buf.String(), "err=") {
		t.Errorf("failed Delete logged %q, without its error", buf.String())
	}
}

func TestNothingWhenDebugOff(t *testing.T) {
	rec := &levelRecorder{LogRecorder: &testutil.LogRecorder{}, min: slog.LevelInfo}
	s := logged.New(mem.New(), slog.New(rec))
	if err := s.Put(t.Context(), "a", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if n := rec.CountLevel(slog.LevelDebug); n != 0 {
		t.Errorf("%d debug records with debug off", n)
	}
}

type levelRecorder struct {
	*testutil.LogRecorder
	min slog.Level
}

func (l *levelRecorder) Enabled(_ context.Context, lv slog.Level) bool { return lv >= l.min }
