package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/sync/backup"
	"lockstep/sync/restore"
	"lockstep/web"
)

func TestBar(t *testing.T) {
	for _, c := range []struct {
		done, total int64
		want        string
	}{
		{0, 10, "[..........]"},
		{1, 10, "[#.........]"},
		{9, 10, "[#########.]"},
		{10, 10, "[##########]"},
		{11, 10, "[##########]"}, // more than announced: full, never wider
		{0, 0, "[##########]"},   // nothing to do is done
		{5, 1 << 40, "[..........]"},
	} {
		if got := bar(c.done, c.total, 10); got != c.want {
			t.Errorf("bar(%d, %d) = %q, want %q", c.done, c.total, got, c.want)
		}
	}
}

// TestWaitingPlain: off a terminal, a short wait says nothing (stderr
// stays the one line of an error); a long one is said on plain lines a
// log can keep, with no cursor movement.
func TestWaitingPlain(t *testing.T) {
	defer func(d time.Duration) { plainWaitAfter = d }(plainWaitAfter)
	plainWaitAfter = 50 * time.Millisecond
	var b syncBuffer
	waiting(&b, "sharing docs")()
	if b.String() != "" {
		t.Fatalf("a short wait wrote %q", b.String())
	}
	stop := waiting(&b, "sharing docs")
	time.Sleep(400 * time.Millisecond)
	stop()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "sharing docs ... (0s)" || !strings.HasPrefix(lines[1], "sharing docs ... (0s)") || strings.ContainsAny(b.String(), "\r\x1b") {
		t.Fatalf("a long wait wrote %q; want a line after 50 ms and again after 250 ms", b.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a writing goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("disk full"), exitError},
		{usageErr{"give --all or a path"}, exitUsage},
		{errors.New(`unknown flag: --bogus`), exitUsage},
		{errors.New(`required flag(s) "to" not set`), exitUsage},
		{noDaemonErr{"no lockstep daemon is running"}, exitNoDaemon},
		{fmt.Errorf("listing: %w", web.ErrUnreachable), exitNoDaemon},
		{&web.APIError{Code: 403, Message: "wrong password", Kind: web.KindVerification}, exitVerification},
		{&web.APIError{Code: 404, Message: `no folder "x"`}, exitError},
		{fmt.Errorf("recovering: %w", restore.ErrWrongPassword), exitVerification},
		{fmt.Errorf("%w: 2 files", restore.ErrDamaged), exitVerification},
		{fmt.Errorf("%w: device X", restore.ErrIncomplete), exitVerification},
		{fmt.Errorf("chunk: %w", crypt.ErrAuth), exitVerification},
		{fmt.Errorf("%w: receiver serves less", backup.ErrRollback), exitVerification},
		{restore.ErrNotShared, exitError},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
