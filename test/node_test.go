package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

var deviceIDPattern = func(s string) bool {
	groups := strings.Split(s, "-")
	if len(groups) != 8 {
		return false
	}
	for _, g := range groups {
		if len(g) != 7 || strings.Trim(g, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
			return false
		}
	}
	return true
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func TestInitAndID(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h")
	first := lastLine(mustRun(t, home, "init", "--name", "laptop"))
	if !deviceIDPattern(first) {
		t.Fatalf("init printed %q, not a device ID", first)
	}
	again := lastLine(mustRun(t, home, "init"))
	if again != first {
		t.Fatalf("second init printed %q, first %q: init must be idempotent", again, first)
	}
	id := strings.TrimSpace(mustRun(t, home, "id"))
	if id != first {
		t.Fatalf("id printed %q, init %q", id, first)
	}
	for _, f := range []string{"cert.pem", "key.pem", "apikey", "lockstep.db"} {
		if _, err := os.Stat(filepath.Join(home, f)); err != nil {
			t.Errorf("home lacks %s: %v", f, err)
		}
	}
	st, err := os.Stat(filepath.Join(home, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		t.Errorf("key.pem mode %v is readable by others", st.Mode().Perm())
	}

	// LOCKSTEP_HOME is honoured when --home is absent.
	t.Setenv("LOCKSTEP_HOME", home)
	r := run(t, "", "id") // --home "" falls back to the environment
	if strings.TrimSpace(r.stdout) != first {
		t.Fatalf("id via LOCKSTEP_HOME printed %q (stderr %q)", r.stdout, r.stderr)
	}
}

func TestIDWithoutHomeFails(t *testing.T) {
	r := run(t, filepath.Join(t.TempDir(), "empty"), "id")
	if r.code == 0 {
		t.Fatal("id on an empty home succeeded")
	}
	assertOneLineError(t, r)
}

func TestCommandsWithoutDaemon(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h")
	mustRun(t, home, "init")
	for _, args := range [][]string{{"status"}, {"device", "list"}, {"pending"}} {
		r := run(t, home, args...)
		if r.code == 0 {
			t.Fatalf("%v without a daemon succeeded", args)
		}
		assertOneLineError(t, r)
		if !strings.Contains(r.stderr, "no lockstep daemon") {
			t.Errorf("%v: stderr %q does not say no daemon runs", args, r.stderr)
		}
	}
}

// A node killed with SIGKILL leaves a stale serve.json; the CLI must still
// say clearly that nothing runs.
func TestStaleServeJSON(t *testing.T) {
	n := startNode(t, "a")
	n.kill()
	if _, err := os.Stat(filepath.Join(n.home, "serve.json")); err != nil {
		t.Fatalf("expected a stale serve.json after SIGKILL: %v", err)
	}
	r := run(t, n.home, "status")
	if r.code == 0 {
		t.Fatal("status against a dead daemon succeeded")
	}
	assertOneLineError(t, r)
	if !strings.Contains(r.stderr, "not running") {
		t.Errorf("stderr %q does not say the daemon is not running", r.stderr)
	}
	// And a new daemon starts over the stale file.
	n2 := startNodeIn(t, "a", n.home)
	if n2.ID != n.ID {
		t.Fatalf("restarted node has ID %s, was %s", n2.ID, n.ID)
	}
}

func assertOneLineError(t *testing.T, r result) {
	t.Helper()
	msg := strings.TrimSpace(r.stderr)
	if msg == "" || strings.Contains(msg, "\n") {
		t.Errorf("stderr should be one line, got %q", r.stderr)
	}
	if strings.Contains(msg, "goroutine ") || strings.Contains(msg, "panic") {
		t.Errorf("stderr looks like a stack trace: %q", r.stderr)
	}
}

func TestServeLifecycle(t *testing.T) {
	n := startNode(t, "a")
	if !deviceIDPattern(n.ID) || !strings.HasPrefix(n.Listen, "tcp://127.0.0.1:") || !strings.HasPrefix(n.GUI, "http://127.0.0.1:") {
		t.Fatalf("serve.json: id %q listen %q gui %q", n.ID, n.Listen, n.GUI)
	}
	if id := strings.TrimSpace(n.cli("id")); id != n.ID {
		t.Fatalf("id %q, serve.json %q", id, n.ID)
	}
	// Health needs no key; the API does.
	resp, err := httpGet(n.GUI+"/healthz", "")
	if err != nil || resp != 200 {
		t.Fatalf("healthz: %d %v", resp, err)
	}
	if code, _ := httpGet(n.GUI+"/rest/status", ""); code != 401 {
		t.Fatalf("/rest/status without key: %d, want 401", code)
	}
	if code, _ := httpGet(n.GUI+"/rest/status", "wrong"); code != 401 {
		t.Fatalf("/rest/status with a wrong key: %d, want 401", code)
	}
	var st status
	n.get("/rest/status", &st)
	if st.DeviceID != n.ID {
		t.Fatalf("status deviceID %q, want %q", st.DeviceID, n.ID)
	}
	out := n.cli("status", "--json")
	var cliSt map[string]any
	if err := json.Unmarshal([]byte(out), &cliSt); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"deviceID", "folders", "devices"} {
		if _, ok := cliSt[k]; !ok {
			t.Errorf("status --json lacks %q: %s", k, out)
		}
	}

	// A second daemon on the same home is refused with a clear error.
	r := run(t, n.home, "serve", "--listen", "tcp://127.0.0.1:0", "--gui", "127.0.0.1:0")
	if r.code == 0 {
		t.Fatal("a second serve on the same home succeeded")
	}
	if !strings.Contains(r.stderr, "in use by another lockstep process") {
		t.Errorf("second serve: stderr %q does not explain the lock", r.stderr)
	}
	assertOneLineError(t, r)

	if err := n.stop(); err != nil {
		t.Fatalf("serve did not exit cleanly on SIGTERM: %v\n%s", err, n.log.String())
	}
	if _, err := os.Stat(filepath.Join(n.home, "serve.json")); !os.IsNotExist(err) {
		t.Fatalf("serve.json still present after a clean exit: %v", err)
	}
}

func TestServeRefusesNonLoopbackConsole(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h")
	r := run(t, home, "serve", "--listen", "tcp://127.0.0.1:0", "--gui", "0.0.0.0:0")
	if r.code == 0 {
		t.Fatal("serve exposed the console beyond loopback")
	}
	assertOneLineError(t, r)
}

func TestPairingAndPending(t *testing.T) {
	a := startNode(t, "a")
	b := startNode(t, "b")
	a.cli("device", "add", b.ID, "--name", "b", "--address", b.Listen)
	b.cli("device", "add", a.ID, "--name", "a", "--address", a.Listen)
	testutil.Eventually(t, 20*time.Second, "a and b to connect", func() bool {
		return a.connectedTo(b.ID) && b.connectedTo(a.ID)
	})

	// c knows a, but a does not know c: c is refused and becomes pending on a.
	c := startNode(t, "c")
	c.cli("device", "add", a.ID, "--address", a.Listen)
	var pending struct {
		Devices []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"devices"`
	}
	testutil.Eventually(t, 20*time.Second, "c to be pending on a", func() bool {
		a.get("/rest/pending", &pending)
		return len(pending.Devices) == 1 && pending.Devices[0].ID == c.ID
	})
	if pending.Devices[0].Name != "c" {
		t.Errorf("c is pending on a as %q, want the name it gave itself", pending.Devices[0].Name)
	}
	if c.connectedTo(a.ID) || a.connectedTo(c.ID) {
		t.Fatal("an unknown device got a connection")
	}
	if !strings.Contains(a.cli("pending"), c.ID) {
		t.Error("pending does not list c")
	}

	// Accepting c makes it a device; c keeps dialing and now gets in.
	a.cli("pending", "accept", c.ID)
	testutil.Eventually(t, 30*time.Second, "c to connect after acceptance", func() bool {
		return a.connectedTo(c.ID) && c.connectedTo(a.ID)
	})
	a.get("/rest/pending", &pending)
	if len(pending.Devices) != 0 {
		t.Errorf("c still pending after acceptance: %+v", pending)
	}

	// Removing b drops the connection on a's side.
	a.cli("device", "remove", b.ID)
	testutil.Eventually(t, 20*time.Second, "b to be disconnected after removal", func() bool {
		return !b.connectedTo(a.ID)
	})
	if strings.Contains(a.cli("device", "list"), b.ID) {
		t.Error("removed device still listed")
	}
}

func TestDeviceAddRejectsBadIDs(t *testing.T) {
	a := startNode(t, "a")
	b := startNode(t, "b")
	// Change one character of a valid ID: the check character catches it.
	bad := []byte(b.ID)
	if bad[3] == 'A' {
		bad[3] = 'B'
	} else {
		bad[3] = 'A'
	}
	for _, id := range []string{string(bad), "hello", a.ID} {
		r := run(t, a.home, "device", "add", id)
		if r.code == 0 {
			t.Errorf("device add %q succeeded", id)
			continue
		}
		assertOneLineError(t, r)
	}
	// Lower case and no dashes are accepted as the same ID.
	loose := strings.ToLower(strings.ReplaceAll(b.ID, "-", ""))
	out := a.cli("device", "add", loose, "--address", b.Listen)
	if !strings.Contains(out, b.ID) {
		t.Errorf("device add of %q printed %q, want canonical %s", loose, out, b.ID)
	}
	r := run(t, a.home, "device", "add", b.ID, "--address", "http://x")
	if r.code == 0 {
		t.Error("device add accepted a non-tcp address")
	}
}

func TestUsageErrorsPointToHelp(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h")
	for _, args := range [][]string{{"bogus"}, {"folder", "add"}, {"serve", "--no-such-flag"}} {
		r := run(t, home, args...)
		if r.code == 0 {
			t.Fatalf("%v succeeded", args)
		}
		assertOneLineError(t, r)
		if !strings.Contains(r.stderr, "--help") {
			t.Errorf("%v: %q does not point to --help", args, r.stderr)
		}
	}
}
