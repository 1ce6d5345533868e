package test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// The hostile peer (test/hostile) is a device that misbehaves on purpose;
// these helpers build it, run its scenarios against a node and read the
// JSON lines it prints.

var (
	hostileOnce sync.Once
	hostilePath string
	hostileErr  error
)

// hostileTool builds test/hostile beside the lockstep binary (TestMain
// removes that directory) on first use and returns its path.
func hostileTool(t testing.TB) string {
	t.Helper()
	hostileOnce.Do(func() {
		hostilePath = filepath.Join(filepath.Dir(binary), "hostile")
		out, err := exec.Command("go", "build", "-o", hostilePath, "./hostile").CombinedOutput()
		if err != nil {
			hostileErr = errors.New("building test/hostile: " + err.Error() + "\n" + string(out))
		}
	})
	if hostileErr != nil {
		t.Fatal(hostileErr)
	}
	return hostilePath
}

// hostileLine is one line the tool printed; each event fills some fields.
type hostileLine struct {
	Event       string `json:"event"`
	ID          string `json:"id"`
	Folder      string `json:"folder"`
	Name        string `json:"name"`
	Type        string `json:"type"`
	Deleted     bool   `json:"deleted"`
	Permissions uint32 `json:"permissions"`
	Version     []struct {
		ID    uint64 `json:"id"`
		Value uint64 `json:"value"`
	} `json:"version"`
	Hashes []string `json:"hashes"`
	// request
	What string `json:"what"`
	OK   bool   `json:"ok"`
	Err  string `json:"err"`
	Data string `json:"data"`
	// cluster-config
	Polynomial uint64 `json:"polynomial"`
	Fixed      bool   `json:"fixed"`
	// sealed-index, envelope-put
	Records    int    `json:"records"`
	MaxCounter uint64 `json:"maxCounter"`
	Highest    uint64 `json:"highest"`
	Stored     bool   `json:"stored"`
	// flood-handshakes, flood-index-sent
	Refused  int     `json:"refused"`
	Accepted int     `json:"accepted"`
	Failed   int     `json:"failed"`
	Last     string  `json:"last"`
	Seconds  float64 `json:"seconds"`
	Message  int     `json:"message"`
	Bytes    int     `json:"bytes"`
}

// counter is the value of device short's counter in the line's version.
func (l hostileLine) counter(short uint64) uint64 {
	for _, c := range l.Version {
		if c.ID == short {
			return c.Value
		}
	}
	return 0
}

// hostileRun is a running scenario of the tool.
type hostileRun struct {
	t        testing.TB
	scenario string
	cmd      *exec.Cmd
	out, log *testutil.LockedBuffer
	exited   chan struct{}
	err      error
}

// hostileID returns the device ID of the tool's identity in home,
// creating it.
func hostileID(t testing.TB, home string) string {
	t.Helper()
	out, err := exec.Command(hostileTool(t), "-scenario", "id", "-home", home).Output()
	if err != nil {
		t.Fatalf("hostile -scenario id: %v", err)
	}
	var l hostileLine
	if err := json.Unmarshal(out, &l); err != nil || l.ID == "" {
		t.Fatalf("hostile -scenario id printed %q: %v", out, err)
	}
	return l.ID
}

// startHostile runs the tool's scenario against node n as the identity in
// home (none: flood-handshakes), for folder; extra flags follow.
func startHostile(t testing.TB, scenario string, n *node, home, folder string, extra ...string) *hostileRun {
	t.Helper()
	args := []string{"-scenario", scenario, "-to", n.Listen, "-device", n.ID}
	if home != "" {
		args = append(args, "-home", home)
	}
	if folder != "" {
		args = append(args, "-folder", folder)
	}
	h := &hostileRun{t: t, scenario: scenario, out: &testutil.LockedBuffer{}, log: &testutil.LockedBuffer{}, exited: make(chan struct{})}
	h.cmd = exec.Command(hostileTool(t), append(args, extra...)...)
	h.cmd.Stdout, h.cmd.Stderr = h.out, h.log
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		h.err = h.cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("hostile %s printed:\n%s%s", scenario, h.out.String(), h.log.String())
		}
	})
	return h
}

// stop ends the scenario (SIGTERM, then SIGKILL after 10 s).
func (h *hostileRun) stop() {
	select {
	case <-h.exited:
		return
	default:
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
	case <-time.After(10 * time.Second):
		h.cmd.Process.Kill()
		<-h.exited
	}
}

// waitExit waits up to d for the scenario to end and fails the test
// unless it ended cleanly.
func (h *hostileRun) waitExit(d time.Duration) {
	h.t.Helper()
	select {
	case <-h.exited:
	case <-time.After(d):
		h.t.Fatalf("hostile %s still running after %v", h.scenario, d)
	}
	if h.err != nil {
		h.t.Fatalf("hostile %s: %v\n%s", h.scenario, h.err, h.log.String())
	}
}

// lines returns the complete lines printed so far.
func (h *hostileRun) lines() []hostileLine {
	h.t.Helper()
	var out []hostileLine
	sc := bufio.NewScanner(strings.NewReader(h.out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l hostileLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // a line still being written
		}
		out = append(out, l)
	}
	return out
}

// wait waits up to d for a line that match accepts and returns the
// first; the tool exiting with an error fails the test at once.
func (h *hostileRun) wait(d time.Duration, what string, match func(hostileLine) bool) hostileLine {
	h.t.Helper()
	var found hostileLine
	testutil.Eventually(h.t, d, what, func() bool {
		for _, l := range h.lines() {
			if l.Event == "error" {
				h.t.Fatalf("hostile %s failed: %s", h.scenario, l.Err)
			}
			if match(l) {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// hostileFolder is the part of a folder's status these tests read.
type hostileFolder struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	Error       string `json:"error"`
	LocalFiles  int64  `json:"localFiles"`
	GlobalFiles int64  `json:"globalFiles"`
	NeedFiles   int64  `json:"needFiles"`
	Peers       []struct {
		Device    string `json:"device"`
		Connected bool   `json:"connected"`
		Untrusted bool   `json:"untrusted"`
		Error     string `json:"error"`
	} `json:"peers"`
}

// folderState returns folder id's status on n.
func folderState(t testing.TB, n *node, id string) hostileFolder {
	t.Helper()
	var st struct {
		Folders []hostileFolder `json:"folders"`
	}
	n.get("/rest/status", &st)
	for _, f := range st.Folders {
		if f.ID == id {
			return f
		}
	}
	t.Fatalf("%s has no folder %q", n.name, id)
	return hostileFolder{}
}

// logLines returns the lines of n's log that contain every one of words.
func logLines(n *node, words ...string) []string {
	var out []string
	for line := range strings.SplitSeq(n.log.String(), "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// consistently checks cond every 100 ms for d and fails the test the first
// time it does not hold.
func consistently(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
	}
}

// shareWithHostile adds the tool's identity in home to n (trusted, or
// untrusted with untrusted set) and, for a trusted one, shares folder
// with it. It returns the tool's device ID.
func shareWithHostile(t testing.TB, n *node, home, folder string, untrusted bool) string {
	t.Helper()
	id := hostileID(t, home)
	if untrusted {
		n.cli("device", "add", id, "--name", "hostile", "--untrusted")
		return id
	}
	n.cli("device", "add", id, "--name", "hostile")
	n.cli("folder", "share", folder, id)
	return id
}

// writeFiles writes name → content under dir, making directories.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
