package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// ErrRunning means a check of the folder is under way already.
var ErrRunning = errors.New("a check of this folder is running already")

// RunOptions say what one check covers.
type RunOptions struct {
	// Receiver limits a trusted device's check to one receiver; the zero
	// ID checks them all.
	Receiver crypt.DeviceID
	ReadData ReadData
	// Repair sends chunks found missing or cut short again, from this
	// device's files or another receiver.
	Repair bool
}

// Checker runs one check of a folder: a trusted device's of its
// receivers (backup.Check), or a receiver's of its own store.
type Checker func(ctx context.Context, folder string, opts RunOptions, progress func(Progress)) ([]Report, error)

// Results keeps schedules and last results (storage/db).
type Results interface {
	CheckSchedules(ctx context.Context) ([]db.CheckSchedule, error)
	PutCheckResult(ctx context.Context, r db.CheckResult) error
	LastCheck(ctx context.Context, folderID string) (db.CheckResult, error)
}

// Service runs checks on demand and on their schedules, one at a time per
// folder, and keeps each folder's last result. Safe for concurrent use.
type Service struct {
	check   Checker
	results Results
	log     *slog.Logger
	// tick is how often Serve looks for checks that are due.
	tick time.Duration

	mu      sync.Mutex
	running map[string]Progress
	// failed holds, per folder, the last check that could not run (no
	// receiver to reach, no key), so a schedule does not try it every
	// tick and the folder's state can say why.
	failed map[string]Failure
}

// Failure is a check that could not run.
type Failure struct {
	At  time.Time `json:"at"`
	Err string    `json:"error"`
}

// NewService returns a Service running checks through check.
func NewService(check Checker, results Results, log *slog.Logger) *Service {
	return &Service{check: check, results: results, log: log, tick: time.Minute, running: map[string]Progress{}, failed: map[string]Failure{}}
}

// Run checks folder now and records the result. A check that could not
// run at all records nothing and returns its error.
func (s *Service) Run(ctx context.Context, folder string, opts RunOptions) ([]Report, error) {
	s.mu.Lock()
	if _, busy := s.running[folder]; busy {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w (folder %s)", ErrRunning, folder)
	}
	s.running[folder] = Progress{Phase: "starting"}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, folder)
		s.mu.Unlock()
	}()
	reps, err := s.check(ctx, folder, opts, func(p Progress) {
		s.mu.Lock()
		s.running[folder] = p
		s.mu.Unlock()
	})
	if err != nil {
		if ctx.Err() == nil {
			s.mu.Lock()
			s.failed[folder] = Failure{At: time.Now(), Err: err.Error()}
			s.mu.Unlock()
		}
		return reps, err
	}
	s.mu.Lock()
	delete(s.failed, folder)
	s.mu.Unlock()
	clean := true
	for i := range reps {
		clean = clean && reps[i].Clean()
	}
	if clean && !s.clears(ctx, folder, opts) {
		// A narrower or lighter check than the one that failed proves
		// nothing of what that one found.
		s.log.Info("a clean check narrower than the failed one before it; the failure stands", "folder", folder)
		return reps, nil
	}
	data, err := json.Marshal(reps)
	if err != nil {
		return reps, err
	}
	// Recorded even when the caller went away: the check is done.
	if err := s.results.PutCheckResult(context.WithoutCancel(ctx), db.CheckResult{Folder: folder, Finished: time.Now(), Clean: clean, Reports: data}); err != nil {
		return reps, err
	}
	return reps, nil
}

// clears reports whether a clean check with opts clears the folder's
// last result when that failed: only one of every receiver that reads at
// least as much data.
func (s *Service) clears(ctx context.Context, folder string, opts RunOptions) bool {
	last, err := s.results.LastCheck(ctx, folder)
	if err != nil || last.Clean {
		return true
	}
	if opts.Receiver != (crypt.DeviceID{}) {
		return false
	}
	var reps []Report
	if json.Unmarshal(last.Reports, &reps) != nil {
		return true
	}
	failed := 0
	for _, r := range reps {
		failed = max(failed, modeRank(r.Mode))
	}
	return modeRank(opts.ReadData.mode()) >= failed
}

// modeRank orders modes by how much data they read.
func modeRank(mode string) int {
	switch mode {
	case "read-data":
		return 2
	case "read-data-subset":
		return 1
	}
	return 0
}

// Failed returns the folder's last check that could not run, if the
// check after it has not run either.
func (s *Service) Failed(folder string) (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.failed[folder]
	return f, ok
}

// Running returns the progress of the folder's check under way.
func (s *Service) Running(folder string) (Progress, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.running[folder]
	return p, ok
}

// Last is a folder's last check as the status shows it.
type Last struct {
	Finished  time.Time
	Clean     bool
	LastClean time.Time
	Reports   []Report
}

// Last returns the folder's last check, or ok false when it has none.
func (s *Service) Last(ctx context.Context, folder string) (Last, bool, error) {
	r, err := s.results.LastCheck(ctx, folder)
	if errors.Is(err, db.ErrNotFound) {
		return Last{}, false, nil
	}
	if err != nil {
		return Last{}, false, err
	}
	l := Last{Finished: r.Finished, Clean: r.Clean, LastClean: r.LastClean}
	if err := json.Unmarshal(r.Reports, &l.Reports); err != nil {
		return Last{}, false, fmt.Errorf("last check of folder %s: %w", folder, err)
	}
	return l, true, nil
}

// Serve runs each scheduled check when it is due (its interval since the
// last one ended, or at once when there was none), until ctx ends.
func (s *Service) Serve(ctx context.Context) error {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		s.runDue(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// runDue runs the checks that are due, one after another.
func (s *Service) runDue(ctx context.Context) {
	scheds, err := s.results.CheckSchedules(ctx)
	if err != nil {
		s.log.Warn("reading check schedules", "err", err)
		return
	}
	for _, sc := range scheds {
		if ctx.Err() != nil {
			return
		}
		last, err := s.results.LastCheck(ctx, sc.Folder)
		if err != nil && !errors.Is(err, db.ErrNotFound) {
			s.log.Warn("reading the last check", "folder", sc.Folder, "err", err)
			continue
		}
		if err == nil && time.Since(last.Finished) < sc.Every {
			continue
		}
		if f, ok := s.Failed(sc.Folder); ok && time.Since(f.At) < min(sc.Every, failedRetry) {
			continue
		}
		rd, err := ParseReadData(sc.ReadData)
		if err != nil {
			s.log.Warn("a check schedule's read-data setting", "folder", sc.Folder, "err", err)
			continue
		}
		reps, err := s.Run(ctx, sc.Folder, RunOptions{ReadData: rd})
		switch {
		case errors.Is(err, ErrRunning) || ctx.Err() != nil:
		case err != nil:
			s.log.Warn("scheduled check could not run", "folder", sc.Folder, "err", err)
		default:
			for _, r := range reps {
				if !r.Clean() {
					s.log.Error("scheduled check found problems", "folder", sc.Folder, "receiver", r.Receiver, "result", r.Summary())
				}
			}
		}
	}
}

// failedRetry bounds how long a schedule waits after a check that could
// not run before it tries again.
var failedRetry = time.Hour

// ParseReadData parses what `check` and a schedule take: "" (metadata
// only), "all", "N%" (0 < N <= 100) or a size ("500MiB", "2GB", "1048576").
func ParseReadData(s string) (ReadData, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return ReadData{}, nil
	case s == "all":
		return ReadData{All: true}, nil
	case strings.HasSuffix(s, "%"):
		p, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil || !(p > 0 && p <= 100) { // NaN is neither
			return ReadData{}, fmt.Errorf("read-data subset %q: want a percentage above 0 and at most 100", s)
		}
		if p == 100 {
			return ReadData{All: true}, nil
		}
		return ReadData{Percent: p}, nil
	}
	n, err := ParseSize(s)
	if err != nil || n <= 0 {
		return ReadData{}, fmt.Errorf("read-data subset %q: want N%% or a size such as 500MiB", s)
	}
	return ReadData{Bytes: n}, nil
}

// String is the form ParseReadData takes.
func (r ReadData) String() string {
	switch {
	case r.All:
		return "all"
	case r.Percent > 0:
		return strconv.FormatFloat(r.Percent, 'f', -1, 64) + "%"
	case r.Bytes > 0:
		return strconv.FormatInt(r.Bytes, 10)
	}
	return ""
}

// sizeUnits are the suffixes ParseSize knows, in lower case, longest
// first.
var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"b", 1},
}

// ParseSize parses a byte count with an optional unit, in any case:
// "1048576", "512KiB", "1.5GB" (KB, MB, GB and TB are powers of 1000; KiB,
// MiB, GiB, TiB and K, M, G, T of 1024). It is the one size syntax of
// the CLI's flags.
func ParseSize(s string) (int64, error) {
	num, mult := strings.ToLower(strings.TrimSpace(s)), 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) || n*mult > 1<<62 {
		return 0, fmt.Errorf("size %q: want a number of bytes, with KiB, MiB, GiB, TiB, KB, MB, GB or TB", s)
	}
	return int64(n * mult), nil
}

// ParseInterval parses a schedule's interval: a Go duration ("12h",
// "90m") or whole days ("7d"), at least a minute.
func ParseInterval(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < time.Minute {
		return 0, fmt.Errorf("interval %q: want a duration of a minute or more, such as 7d, 12h or 90m", s)
	}
	return d, nil
}

// FormatInterval is the form ParseInterval takes, in days when whole.
func FormatInterval(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return d.String()
}
