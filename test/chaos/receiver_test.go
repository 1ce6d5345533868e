//go:build linux

package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// Helpers for the scenarios with an untrusted receiver (README "Back up
// to an untrusted receiver").

// passwordFile writes a folder password to a file and returns its path.
func passwordFile(t testing.TB, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// holdFolder makes receiver r hold folder id for the trusted device d.
func holdFolder(t testing.TB, r, d *node, id string) {
	t.Helper()
	r.cli("folder", "add", id, filepath.Join(t.TempDir(), r.name+"-"+id), "--type", "encrypted")
	r.cli("device", "add", d.ID, "--name", d.name, "--address", d.Listen)
	r.cli("folder", "share", id, d.ID)
}

// backUpTo shares folder id of trusted device d with receiver r.
func backUpTo(t testing.TB, d, r *node, id, pwFile string) {
	t.Helper()
	d.cli("device", "add", r.ID, "--name", r.name, "--address", r.Listen, "--untrusted")
	testutil.Eventually(t, 30*time.Second, d.name+" connected to "+r.name, func() bool { return d.connectedTo(r.ID) })
	d.cli("folder", "share", id, r.ID, "--password-file", pwFile)
}

// storeError returns the first error about folder id that the statuses of
// trusted device d and receiver r show, and where, or "".
func storeError(d, r *node, id string) string {
	var st status
	if r.getJSON("/rest/status", &st) == nil {
		for _, f := range st.Folders {
			if f.ID == id && (f.Error != "" || f.State == "error") {
				return fmt.Sprintf("%s's folder: state %s, error %q", r.name, f.State, f.Error)
			}
		}
	}
	if d.getJSON("/rest/status", &st) == nil {
		for _, f := range st.Folders {
			if f.ID != id {
				continue
			}
			if p := f.peer(r.ID); p.Error != "" {
				return fmt.Sprintf("%s's peer %s: %q", d.name, r.name, p.Error)
			}
			if f.Error != "" {
				return fmt.Sprintf("%s's folder: %q", d.name, f.Error)
			}
		}
	}
	return ""
}

// backedUp reports whether receiver r holds all of d's folder id, as d's
// status says.
func backedUp(d, r *node, id string) bool {
	var st status
	if d.getJSON("/rest/status", &st) != nil {
		return false
	}
	for _, f := range st.Folders {
		if f.ID == id {
			p := f.peer(r.ID)
			return p.Connected && p.Completion == 100
		}
	}
	return false
}

// waitBackedUp waits until r holds all of d's folder id and reports
// whether it did within timeout, without restarting anything.
func waitBackedUp(t testing.TB, d, r *node, id string, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !backedUp(d, r, id) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// receiverState describes both sides of a backup for failure messages.
func receiverState(d, r *node, id string) string {
	var parts []string
	for _, n := range []*node{d, r} {
		var st status
		if err := n.getJSON("/rest/status", &st); err != nil {
			parts = append(parts, err.Error())
			continue
		}
		for _, f := range st.Folders {
			if f.ID != id {
				continue
			}
			s := n.name + ": " + f.describe()
			if f.Receiver != nil {
				s += fmt.Sprintf("; stores %d records, %d chunks, %s", f.Receiver.Records, f.Receiver.Chunks, mib(f.Receiver.StoredBytes))
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// storedBytes returns what receiver r says it stores of folder id.
func storedBytes(r *node, id string) int64 {
	var st status
	if r.getJSON("/rest/status", &st) != nil {
		return -1
	}
	for _, f := range st.Folders {
		if f.ID == id && f.Receiver != nil {
			return f.Receiver.StoredBytes
		}
	}
	return 0
}

// recoverSame recovers folder id from receiver r onto a brand-new device
// (`lockstep recover`) into an empty directory and fails the test unless
// it equals want byte for byte, with no temp file.
func recoverSame(t testing.TB, r *node, id, pwFile, want string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "new")
	out, errOut, code := runCLI(t, home, "init")
	if code != 0 {
		t.Fatalf("lockstep init: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	newID := lines[len(lines)-1]
	r.cli("device", "add", newID, "--name", "new")
	r.cli("folder", "share", id, newID)
	dst := filepath.Join(t.TempDir(), "recovered")
	start := time.Now()
	_, errOut, code = runCLI(t, home, "recover", "--from", r.Listen, "--device", r.ID, "--folder", id, "--password-file", pwFile, "--to", dst)
	if code != 0 {
		t.Fatalf("lockstep recover: exit %d: %s", code, errOut)
	}
	got, err := snapshot(dst)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := snapshot(want)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTrees(exp, got); d != "" {
		t.Fatalf("the recovered folder differs from the original (first: original, second: recovered):\n%s", d)
	}
	if len(got.temps) > 0 {
		t.Errorf("recover left temp files: %v", got.temps)
	}
	t.Logf("recovered %d files from %s in %v: identical, byte for byte", got.files(), r.name, time.Since(start).Round(100*time.Millisecond))
}

// backupBatch writes about size bytes of new files into dir (one to three
// large files and many small ones, which go to packs) and returns the
// bytes written.
func backupBatch(t testing.TB, w *batchWriter, cycle int, size int) int64 {
	t.Helper()
	var n int64
	large := 1 + w.rng.IntN(3)
	for i := range large {
		s := size / 2 / large
		w.write(fmt.Sprintf("b%02d/large-%d.bin", cycle, i), randomBytes(w.rng, s/2+w.rng.IntN(s)))
	}
	for i := 0; n < int64(size)/2; i++ {
		data := randomBytes(w.rng, 1+w.rng.IntN(96<<10))
		w.write(fmt.Sprintf("b%02d/small/%03d.bin", cycle, i), data)
		n += int64(len(data))
	}
	for name := range w.versions {
		if strings.HasPrefix(name, fmt.Sprintf("b%02d/large-", cycle)) {
			fi, err := os.Stat(filepath.Join(w.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// pause sleeps a random time between lo and hi.
func pause(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	d := lo + time.Duration(rng.Int64N(int64(hi-lo)))
	time.Sleep(d)
	return d
}
