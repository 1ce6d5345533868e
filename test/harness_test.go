// Package test runs end-to-end tests against real lockstep processes: the
// binary is built once, every node is a separate `lockstep serve` with its
// own home, and all traffic stays on 127.0.0.1.
package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// binary is the lockstep binary under test, built by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockstep-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "lockstep")
	args := []string{"build", "-o", binary}
	if os.Getenv("LOCKSTEP_RACE") != "" {
		// The daemons run with the race detector; a race makes them exit
		// non-zero, which the tests notice.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/lockstep")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building lockstep:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what a CLI run produced.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the binary with args and the given home.
func run(t testing.TB, home string, args ...string) result {
	t.Helper()
	return runIn(t, "", home, args...)
}

// debugEnv is the environment of a process named name: with
// LOCKSTEP_PROFILE_DIR or LOCKSTEP_TRACE_DIR set, it writes its CPU profile
// (name.pprof) or execution trace (name.trace) there, for measuring the
// benchmarks' processes. nil means the test's own environment.
func debugEnv(name string) []string {
	var env []string
	if dir := os.Getenv("LOCKSTEP_PROFILE_DIR"); dir != "" {
		env = append(env, "LOCKSTEP_CPUPROFILE="+filepath.Join(dir, name+".pprof"))
	}
	if dir := os.Getenv("LOCKSTEP_TRACE_DIR"); dir != "" {
		env = append(env, "LOCKSTEP_TRACE="+filepath.Join(dir, name+".trace"))
	}
	if env == nil {
		return nil
	}
	return append(os.Environ(), env...)
}

// command is the binary with args, run in network namespace ns if set.
func command(ctx context.Context, ns string, args ...string) *exec.Cmd {
	if ns == "" {
		return exec.CommandContext(ctx, binary, args...)
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, binary}, args...)...)
}

// runIn runs the binary with args and the given home in network namespace
// ns ("" for this one).
func runIn(t testing.TB, ns, home string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := command(ctx, ns, append([]string{"--home", home}, args...)...)
	if len(args) > 0 {
		// The last run of each command keeps its profile.
		cmd.Env = debugEnv("cli-" + args[0])
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running lockstep %v: %v", args, err)
	}
	return r
}

// mustRun runs the binary and fails the test unless it exits 0.
func mustRun(t testing.TB, home string, args ...string) string {
	t.Helper()
	r := run(t, home, args...)
	if r.code != 0 {
		t.Fatalf("lockstep %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// node is a running `lockstep serve`.
type node struct {
	t      testing.TB
	name   string
	home   string
	ns     string // network namespace, "" for this one
	cmd    *exec.Cmd
	log    *testutil.LockedBuffer
	exited chan struct{}
	err    error
	killed bool

	ID     string
	Listen string // tcp://127.0.0.1:PORT
	GUI    string // http://127.0.0.1:PORT
	apiKey string
}

// startNode starts a node with a fresh home (or home, if given) and waits
// until it is ready.
func startNode(t testing.TB, name string, extra ...string) *node {
	t.Helper()
	return startNodeIn(t, name, filepath.Join(t.TempDir(), name), extra...)
}

// startNodeIn starts a node on loopback with its home in homeDir. Local
// discovery is off: its broadcasts would leave the loopback range.
func startNodeIn(t testing.TB, name, homeDir string, extra ...string) *node {
	t.Helper()
	return launch(t, name, homeDir, "", append([]string{"--listen", "tcp://127.0.0.1:0", "--no-local-discovery"}, extra...))
}

// launch starts `lockstep serve` with args in network namespace ns and
// waits until it is ready.
func launch(t testing.TB, name, homeDir, ns string, extra []string) *node {
	t.Helper()
	n := &node{t: t, name: name, home: homeDir, ns: ns, log: &testutil.LockedBuffer{}, exited: make(chan struct{})}
	args := append([]string{"--home", homeDir, "serve", "--gui", "127.0.0.1:0", "--name", name, "--log-level", "debug"}, extra...)
	// `ip netns exec` execs the binary, so the process is the node itself.
	n.cmd = command(context.Background(), ns, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	n.cmd.Env = debugEnv(name)
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		if err := n.stop(); err != nil && !n.killed {
			// A clean SIGTERM exit is 0; anything else (a panic, a data
			// race under LOCKSTEP_RACE) is a failure.
			t.Errorf("%s did not exit cleanly: %v", name, err)
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, n.log.String())
		}
		if dir := os.Getenv("LOCKSTEP_LOG_DIR"); dir != "" {
			// The benchmarks' logs, for reading their debug timings.
			if err := os.WriteFile(filepath.Join(dir, name+".log"), []byte(n.log.String()), 0o644); err != nil {
				t.Errorf("keeping the log of %s: %v", name, err)
			}
		}
	})
	// Ready is when serve.json names this process; the log is shown by
	// the cleanup above if it never is.
	testutil.Eventually(t, 30*time.Second, name+" to be ready", func() bool {
		select {
		case <-n.exited:
			t.Fatalf("%s exited before it was ready: %v\n%s", name, n.err, n.log.String())
		default:
		}
		b, err := os.ReadFile(filepath.Join(homeDir, "serve.json"))
		if err != nil {
			return false
		}
		var info struct {
			DeviceID string   `json:"deviceID"`
			Listen   []string `json:"listen"`
			GUI      string   `json:"gui"`
			PID      int      `json:"pid"`
		}
		if json.Unmarshal(b, &info) != nil || info.PID != n.cmd.Process.Pid {
			return false
		}
		n.ID, n.GUI = info.DeviceID, info.GUI
		if len(info.Listen) > 0 {
			n.Listen = info.Listen[0]
		}
		return true
	})
	key, err := os.ReadFile(filepath.Join(homeDir, "apikey"))
	if err != nil {
		t.Fatal(err)
	}
	n.apiKey = strings.TrimSpace(string(key))
	return n
}

// stop sends SIGTERM and waits for a clean exit.
func (n *node) stop() error {
	select {
	case <-n.exited:
		return n.err
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		n.cmd.Process.Kill()
		<-n.exited
		return errors.New("did not stop within 30s of SIGTERM")
	}
	return n.err
}

// kill stops the node with SIGKILL, as a crash would.
func (n *node) kill() {
	n.killed = true
	n.cmd.Process.Kill()
	<-n.exited
}

// cli runs a CLI command against this node's home.
func (n *node) cli(args ...string) string {
	n.t.Helper()
	r := runIn(n.t, n.ns, n.home, args...)
	if r.code != 0 {
		n.t.Fatalf("lockstep %s on %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), n.name, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// get fetches a REST path with the API key and decodes JSON into out. A
// node in another network namespace is reached through its CLI instead,
// for the paths the CLI has.
func (n *node) get(path string, out any) {
	n.t.Helper()
	if n.ns != "" {
		var b string
		switch path {
		case "/rest/status":
			b = n.cli("status", "--json")
		default:
			n.t.Fatalf("GET %s on %s: not reachable from outside its namespace", path, n.name)
		}
		if err := json.Unmarshal([]byte(b), out); err != nil {
			n.t.Fatalf("GET %s on %s: %v: %s", path, n.name, err, b)
		}
		return
	}
	req, _ := http.NewRequest(http.MethodGet, n.GUI+path, nil)
	req.Header.Set("X-API-Key", n.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("GET %s on %s: %v", path, n.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		n.t.Fatalf("GET %s on %s: %s: %s", path, n.name, resp.Status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		n.t.Fatalf("GET %s on %s: %v: %s", path, n.name, err, b)
	}
}

// status is the part of /rest/status the tests read.
type status struct {
	DeviceID string `json:"deviceID"`
	Devices  []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Connected bool   `json:"connected"`
		Untrusted bool   `json:"untrusted"`
	} `json:"devices"`
	Folders []json.RawMessage `json:"folders"`
}

func (n *node) status() status {
	var st status
	n.get("/rest/status", &st)
	return st
}

// connectedTo reports whether n's status shows id as connected.
func (n *node) connectedTo(id string) bool {
	for _, d := range n.status().Devices {
		if d.ID == id {
			return d.Connected
		}
	}
	return false
}

// httpGet returns the status code of a GET with an optional API key.
func httpGet(url, key string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
