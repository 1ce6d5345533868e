package test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCLIVersion: `lockstep version` and `lockstep --version` say the
// version, the commit and the Go that built the binary.
func TestCLIVersion(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h")
	for _, args := range [][]string{{"version"}, {"--version"}} {
		res := run(t, home, args...)
		if res.code != 0 || !strings.HasPrefix(res.stdout, "lockstep ") || !strings.Contains(res.stdout, "commit ") || !strings.Contains(res.stdout, runtime.Version()) {
			t.Errorf("lockstep %s: exit %d, stdout %q", args[0], res.code, res.stdout)
		}
	}
}

// TestCLIUsageExitCodes: a mistyped subcommand, an unknown flag or a
// missing argument is bad usage (exit 2), and says what was wrong; before,
// `lockstep folder ad x y` printed the help and exited 0.
func TestCLIUsageExitCodes(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"folder", "ad", "x", "y"}, `unknown command "ad" for "lockstep folder"`},
		{[]string{"device", "lst"}, `unknown command "lst" for "lockstep device"`},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"status", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"folder", "add"}, "accepts 2 arg(s)"},
	} {
		res := run(t, home, c.args...)
		if res.code != 2 || !strings.Contains(res.stderr, c.want) {
			t.Errorf("lockstep %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), res.code, res.stderr, c.want)
		}
	}
	if res := run(t, home, "folder"); res.code != 0 || !strings.Contains(res.stdout, "Available Commands") {
		t.Errorf("lockstep folder: exit %d, stdout %q; want the help", res.code, res.stdout)
	}
}

// TestFolderAddRefusesFile: `folder add ID PATH` with PATH a file fails
// with a clear line and adds nothing.
func TestFolderAddRefusesFile(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "a")
	file := filepath.Join(t.TempDir(), "notes.txt")
	writeFile(t, file, []byte("a file, not a folder\n"), 0o644)
	res := run(t, n.home, "folder", "add", "docs", file)
	if res.code == 0 || !strings.Contains(res.stderr, "is not a directory") {
		t.Fatalf("folder add on a file: exit %d, stderr %q", res.code, res.stderr)
	}
	assertOneLineError(t, res)
	if st := n.status(); len(st.Folders) != 0 {
		t.Fatalf("a folder was added on a file: %+v", st.Folders)
	}
}
