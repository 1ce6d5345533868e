package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// This package's own tests run under the check they offer.
func TestMain(m *testing.M) { Main(m) }

// leakEnv, when set, makes TestLeaksWhenAsked leave a goroutine behind. The
// tests of Main run this test binary again with it set.
const leakEnv = "TESTUTIL_LEAK_A_GOROUTINE"

func TestLeaksWhenAsked(t *testing.T) {
	if os.Getenv(leakEnv) == "" {
		t.Skip("only run by the tests of Main, in a child process")
	}
	never := make(chan struct{})
	go func() { <-never }()
}

// runLeaking runs TestLeaksWhenAsked in a child test binary with args and
// returns its output and whether it exited 0.
func runLeaking(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestLeaksWhenAsked$", "-test.v"}, args...)...)
	cmd.Env = append(os.Environ(), leakEnv+"=1")
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "--- PASS: TestLeaksWhenAsked") {
		t.Fatalf("the leaking test did not run and pass:\n%s", out)
	}
	return string(out), err == nil
}

func TestMainFailsOnLeak(t *testing.T) {
	out, ok := runLeaking(t)
	if ok || !strings.Contains(out, "found unexpected goroutines") {
		t.Fatalf("a leaked goroutine: exit 0 = %v, output:\n%s", ok, out)
	}
}

// TestMainDoesNotCheckWhileFuzzing: under -fuzz (here matching no target,
// so the tests run as usual) a leak does not fail the run.
func TestMainDoesNotCheckWhileFuzzing(t *testing.T) {
	out, ok := runLeaking(t, "-test.fuzz=^$", "-test.fuzzcachedir="+t.TempDir())
	if !ok {
		t.Fatalf("a leak while fuzzing failed the run:\n%s", out)
	}
}
