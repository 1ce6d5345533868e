package test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// maxPendingDevices is the most pending devices a node may keep: the
// exact cap is the node's choice, this is the bound it must stay under.
const maxPendingDevices = 1000

// TestHostileFloodHandshakes: 1,200 fresh identities, none of them known,
// connect one after another (certificates cost nothing). The node refuses
// each, keeps at most maxPendingDevices of them pending (how many, and
// which, is its choice), does not log a line per attempt, and stays
// responsive.
func TestHostileFloodHandshakes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const count = maxPendingDevices + 200
	n := startNode(t, "victim")
	h := startHostile(t, "flood-handshakes", n, "", "", "-count", strconv.Itoa(count), "-parallel", "8")
	h.waitExit(60 * time.Second)
	var done hostileLine
	for _, l := range h.lines() {
		if l.Event == "flood-handshakes" {
			done = l
		}
	}
	t.Logf("%d handshakes in %.1f s: %d refused, %d accepted, %d failed", count, done.Seconds, done.Refused, done.Accepted, done.Failed)
	if done.Refused != count {
		t.Errorf("the node refused %d of %d unknown devices (accepted %d, %d failed)", done.Refused, count, done.Accepted, done.Failed)
	}
	// The node records them as they come; give it 2 s to finish.
	most := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		var pending struct {
			Devices []struct{} `json:"devices"`
		}
		start := time.Now()
		n.get("/rest/pending", &pending)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("listing pending devices took %v", d)
		}
		most = max(most, len(pending.Devices))
	}
	t.Logf("%d pending devices", most)
	if most > maxPendingDevices {
		t.Errorf("%d pending devices after %d unknown ones connected; want at most %d", most, count, maxPendingDevices)
	}
	said := 0
	for _, l := range logLines(n, "unknown device") {
		if !strings.Contains(l, "level=DEBUG") {
			said++
		}
	}
	if said > 100 {
		t.Errorf("%d log lines about unknown devices for %d attempts: a flood of handshakes floods the log", said, count)
	}
	start := time.Now()
	if st := n.status(); st.DeviceID != n.ID {
		t.Fatalf("status after the flood: %+v", st)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("status took %v after the flood", d)
	}
}

// maxFloodRSS bounds the node's peak resident memory through an index
// flood.
const maxFloodRSS = 500 << 20

// TestHostileFloodIndex: a trusted peer floods the node with tiny records
// (deleted files the node never had), first as three index messages of
// 1.5 million records each (about 50 MB decompressed, 2.5 MB on the
// wire: as much as a frame holds), then as 18 messages of 2^18 records
// (as many as the protocol takes in one message), 4.7 million in all. The
// node must refuse or cap them with bounded memory (peak RSS under
// 500 MiB) and stay responsive: its status answers, and a file added to
// the folder is indexed.
func TestHostileFloodIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "victim")
	dir := filepath.Join(t.TempDir(), "f")
	n.cli("folder", "add", "f", dir)
	home := filepath.Join(t.TempDir(), "hostile")
	shareWithHostile(t, n, home, "f", false)
	before := n.peakRSS()

	// flood runs the tool until the node has dealt with the flood (or
	// ended the connection), for limit at most, and returns how many
	// records it sent.
	flood := func(messages, records int, limit time.Duration) int {
		t.Helper()
		h := startHostile(t, "flood-index", n, home, "f", "-messages", strconv.Itoa(messages), "-records", strconv.Itoa(records), "-duration", limit.String())
		h.waitExit(limit + 5*time.Second)
		sent := 0
		for _, l := range h.lines() {
			switch l.Event {
			case "flood-index-sent":
				sent += l.Records
			case "drained":
				t.Logf("the node took the flood in %.1f s", l.Seconds)
			case "closed":
				if l.Err != "" {
					t.Logf("the node ended the connection: %q", l.Err)
				}
			}
		}
		t.Logf("%d messages of %d records: %d records sent, peak RSS %d MiB", messages, records, sent, n.peakRSS()>>20)
		return sent
	}
	sent := flood(3, 1_500_000, 5*time.Second)
	if sent == 0 {
		t.Fatal("no index message went out")
	}
	// Messages over the protocol's caps are refused before they are
	// decoded: the memory of one message is bounded.
	if peak := n.peakRSS(); peak > maxFloodRSS {
		t.Errorf("peak RSS %d MiB after index messages over the caps; want under %d MiB", peak>>20, maxFloodRSS>>20)
	}
	// Messages within the caps are taken, and the index keeps every record
	// a peer announces in memory: their sum is bounded only by the work of
	// the issue on scale and memory. Shown with LOCKSTEP_HOSTILE_LONG=1
	// (it fails today: some 900 MiB for 4.7 M records).
	long := os.Getenv("LOCKSTEP_HOSTILE_LONG") != ""
	if long {
		sent += flood(18, 1<<18, 18*time.Second)
	}
	start := time.Now()
	if st := n.status(); st.DeviceID != n.ID {
		t.Fatalf("status after the flood: %+v", st)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("status took %v after the flood", d)
	}
	writeFiles(t, dir, map[string]string{"after.txt": "added after the flood\n"})
	testutil.Eventually(t, 15*time.Second, "a file added after the flood to be indexed", func() bool {
		return folderState(t, n, "f").LocalFiles >= 1
	})
	// What the node read before the peer gave up it may still be taking
	// in: wait until it is idle (less than 0.1 s of CPU in a second), for
	// 10 s at most.
	for end, cpu := time.Now().Add(10*time.Second), n.cpuSeconds(); time.Now().Before(end); {
		time.Sleep(time.Second)
		now := n.cpuSeconds()
		if now-cpu < 0.1 {
			break
		}
		cpu = now
	}
	peak := n.peakRSS()
	t.Logf("peak RSS %d MiB before the flood, %d MiB after %d records", before>>20, peak>>20, sent)
	if long && peak > maxFloodRSS {
		t.Errorf("peak RSS %d MiB after an index flood of %d records; want under %d MiB (refuse or cap)", peak>>20, sent, maxFloodRSS>>20)
	}
}
