package test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
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

// TestCLIExitNoDaemon: a command that needs the daemon exits 3 when none
// answers for its home (none started, one killed, a home without the API
// key), with one line that says so and nothing on stdout even with
// --json; an ordinary failure exits 1.
func TestCLIExitNoDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	check := func(what string, res result, want string) {
		t.Helper()
		if res.code != 3 || !strings.Contains(res.stderr, want) || res.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 3 and %q", what, res.code, res.stdout, res.stderr, want)
		}
		assertOneLineError(t, res)
	}
	home := filepath.Join(t.TempDir(), "h")
	mustRun(t, home, "init")
	check("status, never started", run(t, home, "status", "--json"), "no lockstep daemon is running")

	n := startNode(t, "a")
	if res := run(t, n.home, "folder", "remove", "nosuch"); res.code != 1 {
		t.Errorf("removing a folder that does not exist: exit %d, stderr %q; want 1", res.code, res.stderr)
	}
	// A home that names the running daemon but holds no API key.
	keyless := t.TempDir()
	b, err := os.ReadFile(filepath.Join(n.home, "serve.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(keyless, "serve.json"), b, 0o600)
	check("folder list, no API key", run(t, keyless, "folder", "list"), "no API key")

	n.kill()
	check("device list, daemon killed", run(t, n.home, "device", "list", "--json"), "not running")
}

// cliJSON runs a command of n with --json and decodes its stdout, which
// must be one JSON object.
func cliJSON(t *testing.T, n *node, args ...string) map[string]any {
	t.Helper()
	var m map[string]any
	decodeJSON(t, n.cli(append(args, "--json")...), &m)
	return m
}

// TestCLIJSON: every command that prints a result prints, with --json,
// one JSON object (the lists an array) and nothing else on stdout.
func TestCLIJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	a, b := startNode(t, "a"), startNode(t, "b")
	dir := filepath.Join(t.TempDir(), "f")
	want := func(what string, m map[string]any, key string, value any) {
		t.Helper()
		if m[key] != value {
			t.Errorf("%s --json: %q is %#v, want %#v (all: %v)", what, key, m[key], value, m)
		}
	}
	var fresh map[string]any
	decodeJSON(t, mustRun(t, filepath.Join(t.TempDir(), "fresh"), "init", "--json"), &fresh)
	if id, _ := fresh["deviceID"].(string); len(id) != len(a.ID) {
		t.Errorf("init --json: %v", fresh)
	}
	want("id", cliJSON(t, a, "id"), "deviceID", a.ID)
	want("version", cliJSON(t, a, "version"), "go", runtime.Version())
	want("device add", cliJSON(t, a, "device", "add", b.ID, "--name", "b", "--address", b.Listen), "id", b.ID)
	want("device set", cliJSON(t, a, "device", "set", b.ID, "--trusted"), "changed", false)
	want("folder add", cliJSON(t, a, "folder", "add", "f", dir), "id", "f")
	want("folder share", cliJSON(t, a, "folder", "share", "f", b.ID), "action", "shared")
	want("folder versioning set", cliJSON(t, a, "folder", "versioning", "f", "--type", "simple", "--keep", "3"), "type", "simple")
	want("folder versioning", cliJSON(t, a, "folder", "versioning", "f"), "keep", float64(3))
	want("scan", cliJSON(t, a, "scan", "f"), "folder", "f")
	want("prune", cliJSON(t, a, "prune", "f"), "folder", "f")
	want("folder allow-deletes", cliJSON(t, a, "folder", "allow-deletes", "f"), "folder", "f")
	want("console password", cliJSON(t, a, "console", "password", "--password-file", passwordFile(t, "a long console password")), "action", "console-password-set")
	want("status", cliJSON(t, a, "status"), "deviceID", a.ID)
	if p := cliJSON(t, a, "pending"); p["devices"] == nil || p["folders"] == nil {
		t.Errorf("pending --json: %v", p)
	}
	for _, args := range [][]string{{"folder", "list"}, {"device", "list"}, {"device", "nearby"}, {"versions", "f"}} {
		var list []any
		decodeJSON(t, a.cli(append(args, "--json")...), &list)
	}
	want("device remove", cliJSON(t, a, "device", "remove", b.ID), "device", b.ID)
	want("folder remove", cliJSON(t, a, "folder", "remove", "f"), "action", "removed")
}

// TestDeviceRemoveLeavesFolders: a removed device is no longer listed
// among the devices of the folders that were shared with it.
func TestDeviceRemoveLeavesFolders(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	a, b := startNode(t, "a"), startNode(t, "b")
	a.cli("device", "add", b.ID, "--name", "b", "--address", b.Listen)
	a.cli("folder", "add", "f", filepath.Join(t.TempDir(), "f"))
	a.cli("folder", "share", "f", b.ID)
	peers := func() []string {
		var folders []struct {
			Peers []struct{ Device string }
		}
		decodeJSON(t, a.cli("folder", "list", "--json"), &folders)
		var ids []string
		for _, p := range folders[0].Peers {
			ids = append(ids, p.Device)
		}
		return ids
	}
	if got := peers(); !slices.Equal(got, []string{b.ID}) {
		t.Fatalf("folder f is shared with %v; want b", got)
	}
	a.cli("device", "remove", b.ID)
	if got := peers(); len(got) != 0 {
		t.Fatalf("after device remove, folder f is still shared with %v", got)
	}
	if out := a.cli("status"); strings.Contains(out, b.ID) {
		t.Fatalf("after device remove, status still names it:\n%s", out)
	}
}
