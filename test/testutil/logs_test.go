package testutil

import (
	"log/slog"
	"sync"
	"testing"
)

func TestLogRecorderCounts(t *testing.T) {
	rec := &LogRecorder{}
	log := slog.New(rec).With("peer", "a").WithGroup("g")
	log.Warn("dropping announcement")
	log.Warn("dropping announcement without usable addresses")
	log.Debug("dropping announcement")
	log.Info("started")

	for _, tc := range []struct {
		level slog.Level
		msg   string
		want  int
	}{
		{slog.LevelWarn, "dropping announcement", 1}, // exact, not a prefix
		{slog.LevelWarn, "dropping announcement without usable addresses", 1},
		{slog.LevelDebug, "dropping announcement", 1},
		{slog.LevelError, "dropping announcement", 0},
		{slog.LevelInfo, "start", 0},
	} {
		if got := rec.Count(tc.level, tc.msg); got != tc.want {
			t.Errorf("Count(%v, %q) = %d, want %d", tc.level, tc.msg, got, tc.want)
		}
	}
	if got := rec.CountLevel(slog.LevelWarn); got != 2 {
		t.Errorf("CountLevel(Warn) = %d, want 2", got)
	}
	if got := rec.CountLevel(slog.LevelError); got != 0 {
		t.Errorf("CountLevel(Error) = %d, want 0", got)
	}
}

func TestLogRecorderConcurrentUse(t *testing.T) {
	rec := &LogRecorder{}
	log := slog.New(rec)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				log.Info("tick")
				_ = rec.CountLevel(slog.LevelInfo)
			}
		})
	}
	wg.Wait()
	if got := rec.Count(slog.LevelInfo, "tick"); got != 400 {
		t.Errorf("%d records, want 400", got)
	}
}
