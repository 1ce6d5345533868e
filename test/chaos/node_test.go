//go:build linux

package chaos

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

// A trimmed copy of the end-to-end harness (test/harness_test.go), which
// this package cannot import: nodes are `lockstep serve` processes on
// loopback, each with its own home.

// node is a running `lockstep serve`.
type node struct {
	t      testing.TB
	name   string
	home   string
	extra  []string // serve flags, kept for restarts
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

// startNode starts a node with a fresh home.
func startNode(t testing.TB, name string, extra ...string) *node {
	t.Helper()
	return startNodeIn(t, name, filepath.Join(t.TempDir(), name), extra...)
}

// startNodeIn starts a node on loopback with its home in home and waits
// until it is ready. The test's cleanup stops it and fails the test if it
// does not exit cleanly (unless it was killed on purpose).
func startNodeIn(t testing.TB, name, home string, extra ...string) *node {
	t.Helper()
	return launch(t, name, home, "tcp://127.0.0.1:0", extra)
}

// launch starts a node listening on listen for sync connections.
func launch(t testing.TB, name, home, listen string, extra []string) *node {
	t.Helper()
	n := &node{t: t, name: name, home: home, extra: extra, log: &testutil.LockedBuffer{}, exited: make(chan struct{})}
	args := append([]string{"--home", home, "serve", "--listen", listen, "--gui", "127.0.0.1:0",
		"--no-local-discovery", "--name", name, "--log-level", "debug"}, extra...)
	n.cmd = exec.Command(binary, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	// The kernel kills the node if the test binary dies without cleaning up.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		// An earlier run of a node the test restarted shows less.
		lines := 200
		select {
		case <-n.exited:
			lines = 20
		default:
		}
		if err := n.stop(); err != nil && !n.killed {
			t.Errorf("%s did not exit cleanly: %v", name, err)
		}
		if t.Failed() {
			t.Logf("log of %s (pid %d), last %d lines:\n%s", name, n.cmd.Process.Pid, lines, tail(n.log.String(), lines))
		}
	})
	testutil.Eventually(t, 60*time.Second, name+" to be ready", func() bool {
		select {
		case <-n.exited:
			t.Fatalf("%s exited before it was ready: %v\n%s", name, n.err, n.log.String())
		default:
		}
		b, err := os.ReadFile(filepath.Join(home, "serve.json"))
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
	key, err := os.ReadFile(filepath.Join(home, "apikey"))
	if err != nil {
		t.Fatal(err)
	}
	n.apiKey = strings.TrimSpace(string(key))
	return n
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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

// restart starts a node again on n's home, as the same device, on the
// same sync address: peers that know it reach it there, as they would a
// real device.
func (n *node) restart(t testing.TB) *node {
	t.Helper()
	return launch(t, n.name, n.home, n.Listen, n.extra)
}

// cli runs a CLI command against this node's home and fails the test
// unless it exits 0.
func (n *node) cli(args ...string) string {
	n.t.Helper()
	out, errOut, code := runCLI(n.t, n.home, args...)
	if code != 0 {
		n.t.Fatalf("lockstep %s on %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), n.name, code, out, errOut)
	}
	return out
}

// runCLI runs the binary with args and the given home.
func runCLI(t testing.TB, home string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"--home", home}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("running lockstep %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// status is the part of /rest/status the scenarios read.
type status struct {
	DeviceID string         `json:"deviceID"`
	Devices  []deviceStatus `json:"devices"`
	Folders  []folderStatus `json:"folders"`
}

type deviceStatus struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
	Untrusted bool   `json:"untrusted"`
}

type folderStatus struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	State       string `json:"state"`
	Error       string `json:"error"`
	LocalFiles  int64  `json:"localFiles"`
	LocalBytes  int64  `json:"localBytes"`
	GlobalFiles int64  `json:"globalFiles"`
	GlobalBytes int64  `json:"globalBytes"`
	NeedFiles   int64  `json:"needFiles"`
	NeedBytes   int64  `json:"needBytes"`
	// Directories are counted apart from files.
	LocalDirectories  int64        `json:"localDirectories"`
	GlobalDirectories int64        `json:"globalDirectories"`
	NeedDirectories   int64        `json:"needDirectories"`
	PullBytesTotal    int64        `json:"pullBytesTotal"`
	PullBytesDone     int64        `json:"pullBytesDone"`
	PulledBytes       int64        `json:"pulledBytes"`
	ReusedBytes       int64        `json:"reusedBytes"`
	TamperedRecords   int64        `json:"tamperedRecords"`
	TamperedChunks    int64        `json:"tamperedChunks"`
	Peers             []peerStatus `json:"peers"`
	Receiver          *struct {
		Records     int64 `json:"records"`
		Files       int64 `json:"files"`
		Chunks      int64 `json:"chunks"`
		StoredBytes int64 `json:"storedBytes"`
		LogSequence int64 `json:"logSequence"`
	} `json:"receiver"`
}

type peerStatus struct {
	Device     string  `json:"device"`
	Connected  bool    `json:"connected"`
	Completion float64 `json:"completion"`
	Untrusted  bool    `json:"untrusted"`
	Error      string  `json:"error"`
}

// getJSON fetches a REST path with the API key and decodes it into out.
func (n *node) getJSON(path string, out any) error {
	req, err := http.NewRequest(http.MethodGet, n.GUI+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", n.apiKey)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s on %s: %w", path, n.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on %s: %s: %s", path, n.name, resp.Status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("GET %s on %s: %w: %s", path, n.name, err, b)
	}
	return nil
}

// post sends a REST POST with a JSON body (nil for none).
func (n *node) post(path string, body any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(http.MethodPost, n.GUI+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", n.apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s on %s: %w", path, n.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s on %s: %s: %s", path, n.name, resp.Status, b)
	}
	return nil
}

// status returns the node's status, failing the test if it cannot.
func (n *node) status() status {
	n.t.Helper()
	var st status
	if err := n.getJSON("/rest/status", &st); err != nil {
		n.t.Fatal(err)
	}
	return st
}

// folder returns the status of folder id, failing the test if n has none.
func (n *node) folder(id string) folderStatus {
	n.t.Helper()
	for _, f := range n.status().Folders {
		if f.ID == id {
			return f
		}
	}
	n.t.Fatalf("%s has no folder %q", n.name, id)
	return folderStatus{}
}

// peer returns f's entry for device id.
func (f folderStatus) peer(id string) peerStatus {
	for _, p := range f.Peers {
		if p.Device == id {
			return p
		}
	}
	return peerStatus{}
}

// pendingFolders returns the folder offers n lists (device/folder).
func (n *node) pendingFolders() []string {
	n.t.Helper()
	var p struct {
		Folders []struct {
			Device string `json:"device"`
			Folder string `json:"folder"`
		} `json:"folders"`
	}
	if err := n.getJSON("/rest/pending", &p); err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, f := range p.Folders {
		out = append(out, fmt.Sprintf("%.7s/%s", f.Device, f.Folder))
	}
	return out
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

// describe is a one-line summary of a folder's status for failure
// messages.
func (f folderStatus) describe() string {
	s := fmt.Sprintf("state %s, need %d files/%d bytes, local %d files, global %d files", f.State, f.NeedFiles, f.NeedBytes, f.LocalFiles, f.GlobalFiles)
	if f.Error != "" {
		s += fmt.Sprintf(", error %q", f.Error)
	}
	for _, p := range f.Peers {
		s += fmt.Sprintf("; peer %.7s connected=%v completion=%.1f", p.Device, p.Connected, p.Completion)
		if p.Error != "" {
			s += fmt.Sprintf(" error %q", p.Error)
		}
	}
	return s
}

// pair makes a and b trust each other and share folder id, at dirA and
// dirB.
func pair(t testing.TB, a, b *node, id, dirA, dirB string) {
	t.Helper()
	a.cli("device", "add", b.ID, "--name", b.name, "--address", b.Listen)
	b.cli("device", "add", a.ID, "--name", a.name, "--address", a.Listen)
	a.cli("folder", "add", id, dirA)
	b.cli("folder", "add", id, dirB)
	a.cli("folder", "share", id, b.ID)
	b.cli("folder", "share", id, a.ID)
}
