package main

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

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

// TestWaitingPlain: off a terminal, something slow is said once, on one
// line a log can keep, with no cursor movement.
func TestWaitingPlain(t *testing.T) {
	var b bytes.Buffer
	stop := waiting(&b, "sharing docs")
	stop()
	if b.String() != "sharing docs ...\n" {
		t.Fatalf("waiting wrote %q", b.String())
	}
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
		{fmt.Errorf("chunk: %w", crypt.ErrAuth), exitVerification},
		{fmt.Errorf("%w: receiver serves less", backup.ErrRollback), exitVerification},
		{restore.ErrNotShared, exitError},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
