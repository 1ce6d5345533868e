package check

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/test/testutil"
)

func openDB(t *testing.T) *db.DB {
	t.Helper()
	d, err := db.Open(filepath.Join(t.TempDir(), "lockstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.PutFolder(context.Background(), db.Folder{ID: "docs", Path: "/x", Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	return d
}

// ticking counts the rounds Serve makes (each reads the schedules), so a
// test waits for rounds, not for time.
type ticking struct {
	Results
	rounds atomic.Int32
}

func (r *ticking) CheckSchedules(ctx context.Context) ([]db.CheckSchedule, error) {
	defer r.rounds.Add(1)
	return r.Results.CheckSchedules(ctx)
}

// serveRounds runs svc.Serve until it has made n rounds after the first
// check ran.
func serveRounds(t *testing.T, svc *Service, res *ticking, runs *atomic.Int32, n int32) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error)
	go func() { served <- svc.Serve(ctx) }()
	testutil.Eventually(t, 10*time.Second, "the first check", func() bool { return runs.Load() > 0 })
	from := res.rounds.Load()
	testutil.Eventually(t, 10*time.Second, "more rounds", func() bool { return res.rounds.Load() >= from+n })
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func TestServiceRunRecords(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	release := make(chan struct{})
	var runs atomic.Int32
	clean := true
	svc := NewService(func(ctx context.Context, folder string, o RunOptions, progress func(Progress)) ([]Report, error) {
		runs.Add(1)
		progress(Progress{Phase: "data", Chunks: 1, ChunksTotal: 2})
		<-release
		r := Report{Folder: folder, Mode: o.ReadData.mode(), Problems: []Problem{}}
		if !clean {
			r.Add(Problem{Kind: Missing, Object: "chunk x", Path: "a.txt"})
		}
		return []Report{r}, nil
	}, d, slog.Default())
	done := make(chan error)
	go func() { _, err := svc.Run(ctx, "docs", RunOptions{ReadData: ReadData{All: true}}); done <- err }()
	testutil.Eventually(t, 10*time.Second, "the check's progress", func() bool {
		p, ok := svc.Running("docs")
		return ok && p.Phase == "data"
	})
	if _, err := svc.Run(ctx, "docs", RunOptions{}); !errors.Is(err, ErrRunning) {
		t.Fatalf("a second check while one runs: %v, want ErrRunning", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := svc.Running("docs"); ok {
		t.Fatal("check still shown running after it ended")
	}
	last, ok, err := svc.Last(ctx, "docs")
	if err != nil || !ok || !last.Clean || len(last.Reports) != 1 || last.Reports[0].Mode != "read-data" {
		t.Fatalf("last check %+v, %v, %v", last, ok, err)
	}
	clean = false
	release = make(chan struct{})
	close(release)
	if _, err := svc.Run(ctx, "docs", RunOptions{}); err != nil {
		t.Fatal(err)
	}
	last, _, _ = svc.Last(ctx, "docs")
	if last.Clean || last.LastClean.IsZero() || last.Reports[0].Problems[0].Path != "a.txt" {
		t.Fatalf("failed check recorded as %+v", last)
	}
}

func TestServiceSchedule(t *testing.T) {
	d := openDB(t)
	var runs atomic.Int32
	var mode atomic.Value
	res := &ticking{Results: d}
	svc := NewService(func(ctx context.Context, folder string, o RunOptions, _ func(Progress)) ([]Report, error) {
		runs.Add(1)
		mode.Store(o.ReadData.String())
		return []Report{{Folder: folder, Problems: []Problem{}}}, nil
	}, res, slog.Default())
	svc.tick = time.Millisecond
	if err := d.SetCheckSchedule(context.Background(), db.CheckSchedule{Folder: "docs", Every: time.Hour, ReadData: "5%"}); err != nil {
		t.Fatal(err)
	}
	serveRounds(t, svc, res, &runs, 10) // ten more rounds: nothing is due
	if runs.Load() != 1 || mode.Load() != "5%" {
		t.Fatalf("a check due hourly ran %d times in its first hour, reading %v; want once, 5%%", runs.Load(), mode.Load())
	}
}

func TestParseReadData(t *testing.T) {
	good := map[string]ReadData{
		"": {}, "all": {All: true}, "5%": {Percent: 5}, "100%": {All: true}, "0.5%": {Percent: 0.5},
		"500MiB": {Bytes: 500 << 20}, "2GB": {Bytes: 2e9}, "4096": {Bytes: 4096}, "1 GiB": {Bytes: 1 << 30},
	}
	for in, want := range good {
		got, err := ParseReadData(in)
		if err != nil || got != want {
			t.Errorf("ParseReadData(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"0%", "101%", "-5%", "x", "5 apples", "-1", "0", "1e30", "NaN", "Inf", "NaN%"} {
		if got, err := ParseReadData(in); err == nil {
			t.Errorf("ParseReadData(%q) = %+v, want an error", in, got)
		}
	}
}

func TestParseInterval(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "12h": 12 * time.Hour, "90m": 90 * time.Minute, "1d": 24 * time.Hour} {
		got, err := ParseInterval(in)
		if err != nil || got != want {
			t.Errorf("ParseInterval(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, _ := ParseInterval(FormatInterval(got)); back != got {
			t.Errorf("FormatInterval(%v) = %q does not parse back", got, FormatInterval(got))
		}
	}
	for _, in := range []string{"", "0d", "30s", "-1d", "xd", "week"} {
		if got, err := ParseInterval(in); err == nil {
			t.Errorf("ParseInterval(%q) = %v, want an error", in, got)
		}
	}
}

// TestServiceNarrowDoesNotClear: after a failed read-data check, a clean
// metadata check or one of a single receiver leaves the failure standing;
// a clean check as broad clears it.
func TestServiceNarrowDoesNotClear(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	clean := false
	svc := NewService(func(ctx context.Context, folder string, o RunOptions, _ func(Progress)) ([]Report, error) {
		r := Report{Folder: folder, Mode: o.ReadData.mode(), Problems: []Problem{}}
		if !clean {
			r.Add(Problem{Kind: Damaged, Path: "a.txt"})
		}
		return []Report{r}, nil
	}, d, slog.New(slog.DiscardHandler))
	if _, err := svc.Run(ctx, "docs", RunOptions{ReadData: ReadData{All: true}}); err != nil {
		t.Fatal(err)
	}
	clean = true
	for _, o := range []RunOptions{{}, {ReadData: ReadData{Percent: 5}}, {Receiver: crypt.DeviceID{1}, ReadData: ReadData{All: true}}} {
		if _, err := svc.Run(ctx, "docs", o); err != nil {
			t.Fatal(err)
		}
		if last, _, _ := svc.Last(ctx, "docs"); last.Clean {
			t.Fatalf("a clean check %+v cleared a failed read-data check", o)
		}
	}
	if _, err := svc.Run(ctx, "docs", RunOptions{ReadData: ReadData{All: true}}); err != nil {
		t.Fatal(err)
	}
	if last, _, _ := svc.Last(ctx, "docs"); !last.Clean {
		t.Fatal("a clean check as broad as the failed one did not clear it")
	}
}

// TestServiceScheduleFailing: a scheduled check that cannot run is tried
// again only after a while, and says why.
func TestServiceScheduleFailing(t *testing.T) {
	d := openDB(t)
	var runs atomic.Int32
	res := &ticking{Results: d}
	svc := NewService(func(context.Context, string, RunOptions, func(Progress)) ([]Report, error) {
		runs.Add(1)
		return nil, errors.New("no receiver connected")
	}, res, slog.New(slog.DiscardHandler))
	svc.tick = time.Millisecond
	if err := d.SetCheckSchedule(context.Background(), db.CheckSchedule{Folder: "docs", Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	serveRounds(t, svc, res, &runs, 50)
	if n := runs.Load(); n != 1 {
		t.Fatalf("a failing scheduled check ran %d times in 50 rounds, want once", n)
	}
	if f, ok := svc.Failed("docs"); !ok || f.Err != "no receiver connected" {
		t.Fatalf("Failed = %+v, %v", f, ok)
	}
}
