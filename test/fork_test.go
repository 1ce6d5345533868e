package test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// forkWait bounds how long devices may take to compare notes about a
// receiver: claims go out at most every 10 s per peer.
const forkWait = 90 * time.Second

// deadAddress is an address nothing listens on: a receiver given it for
// the trusted devices never dials them, they dial it.
const deadAddress = "tcp://127.0.0.1:1"

// pairTrusted makes a and b trusted peers sharing folder id. Both share
// before they can connect (each knows the other at a dead address first),
// so the fork tests start from the same state every time instead of
// racing a folder offer against the other side's share.
func pairTrusted(t testing.TB, a, b *node, id string) {
	t.Helper()
	a.cli("device", "add", b.ID, "--name", b.name, "--address", deadAddress)
	b.cli("device", "add", a.ID, "--name", a.name, "--address", deadAddress)
	a.cli("folder", "share", id, b.ID)
	b.cli("folder", "share", id, a.ID)
	a.cli("device", "add", b.ID, "--address", b.Listen)
	b.cli("device", "add", a.ID, "--address", a.Listen)
}

// pointAt makes d reach receiver r (by its ID) at where's address.
func pointAt(t testing.TB, d *node, r, where *node) {
	t.Helper()
	d.cli("device", "add", r.ID, "--name", r.name, "--address", where.Listen, "--untrusted")
	testutil.Eventually(t, 30*time.Second, d.name+" connected to "+where.name, func() bool { return d.connectedTo(r.ID) })
}

// writeBatch writes n files named prefix-i into dir, scans, and waits
// until receiver r has them in its log after base and served d's back.
func writeBatch(t testing.TB, d, r *node, dir, prefix string, n int, base int64) {
	t.Helper()
	for i := range n {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("%s-%d", prefix, i)), []byte(prefix+" content "+fmt.Sprint(i)), 0o644)
	}
	d.cli("scan", "docs")
	testutil.Eventually(t, converge, r.name+" to hold "+d.name+"'s new files", func() bool {
		st := r.encFolder("docs")
		return st.Receiver != nil && st.Receiver.LogSequence >= base+int64(n)
	})
	waitBackedUp(t, d, r, "docs")
}

// forkSetup is two trusted devices a and b sharing "docs" with each other
// and with receiver r, synced, then taken apart: a knows r, b knows r, but
// not each other, and r dials neither.
type forkSetup struct {
	a, b, r    *node
	dirA, dirB string
	base       int64 // r's log sequence when they were taken apart
}

func newForkSetup(t *testing.T) *forkSetup {
	t.Helper()
	s := &forkSetup{a: startNode(t, "a"), b: startNode(t, "b"), r: startNode(t, "r")}
	s.dirA, s.dirB = filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	writeFile(t, filepath.Join(s.dirA, "seed"), []byte("before the split"), 0o644)
	s.a.cli("folder", "add", "docs", s.dirA)
	s.b.cli("folder", "add", "docs", s.dirB)
	pairTrusted(t, s.a, s.b, "docs")
	waitSame(t, converge, s.dirA, s.dirB)
	holdFolder(t, s.r, "docs", s.a, s.b)
	pw := passwordFile(t, "pw")
	backUpTo(t, s.a, s.r, "docs", pw)
	backUpTo(t, s.b, s.r, "docs", pw)
	waitBackedUp(t, s.a, s.r, "docs")
	waitBackedUp(t, s.b, s.r, "docs")

	s.a.cli("device", "remove", s.b.ID)
	s.b.cli("device", "remove", s.a.ID)
	for _, d := range []*node{s.a, s.b} {
		s.r.cli("device", "add", d.ID, "--name", d.name, "--address", deadAddress)
	}
	s.base = s.r.encFolder("docs").Receiver.LogSequence
	return s
}

// reunite pairs a and b again.
func (s *forkSetup) reunite(t *testing.T) {
	t.Helper()
	pairTrusted(t, s.a, s.b, "docs")
	testutil.Eventually(t, 30*time.Second, "a and b to connect", func() bool { return s.a.connectedTo(s.b.ID) })
}

// forkReport is d's status error for receiver r, if it names a fork.
func forkReport(d, r *node) string {
	_, _, e := d.encFolder("docs").peer(r.ID)
	if strings.Contains(e, "forked") {
		return e
	}
	return ""
}

// TestReceiverFork: a receiver split in two (the same identity and log,
// an older image of it serving one device, the newer the other) shows
// each device a log that only grows; once the devices meet, they find
// the fork and report it.
func TestReceiverFork(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	s := newForkSetup(t)
	if err := s.r.stop(); err != nil {
		t.Fatal(err)
	}
	home2 := filepath.Join(t.TempDir(), "r2")
	copyTree(t, s.r.home, home2)
	r := startNodeIn(t, "r", s.r.home)
	r2 := startNodeIn(t, "r2", home2)
	if r2.ID != r.ID {
		t.Fatalf("the copy has another identity: %s, %s", r2.ID, r.ID)
	}
	pointAt(t, s.a, r, r)
	pointAt(t, s.b, r, r2)

	writeBatch(t, s.a, r, s.dirA, "from-a", 3, s.base)
	writeBatch(t, s.b, r2, s.dirB, "from-b", 3, s.base)
	if e := forkReport(s.a, r) + forkReport(s.b, r); e != "" {
		t.Fatalf("a fork reported before the devices met: %s", e)
	}

	s.reunite(t)
	testutil.Eventually(t, forkWait, "a and b to report the fork", func() bool {
		return forkReport(s.a, r) != "" && forkReport(s.b, r) != ""
	})
	t.Logf("a reports: %s", forkReport(s.a, r))
	t.Logf("b reports: %s", forkReport(s.b, r))
	// A configuration change (pairing again) re-applies each receiver's
	// ClusterConfig from when it connected: not a rollback.
	if e := forkReport(s.a, r) + forkReport(s.b, r); strings.Contains(e, "rolled back") {
		t.Fatalf("a stale ClusterConfig taken for a rollback: %s", e)
	}
	// Report only: the devices still sync with each other and the
	// receivers.
	waitSame(t, converge, s.dirA, s.dirB)
	if !s.a.connectedTo(r.ID) || !s.b.connectedTo(r.ID) {
		t.Fatal("a device dropped its receiver over the fork report")
	}
}

// TestReceiverNoFork: the same steps with one receiver throughout: the
// devices compare their claims and find nothing.
func TestReceiverNoFork(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	s := newForkSetup(t)
	writeBatch(t, s.a, s.r, s.dirA, "from-a", 3, s.base)
	writeBatch(t, s.b, s.r, s.dirB, "from-b", 3, s.base+3)
	s.reunite(t)
	// Each checks the other's claim and finds it holds.
	for _, pair := range [][2]*node{{s.a, s.b}, {s.b, s.a}} {
		d, from := pair[0], pair[1]
		testutil.Eventually(t, forkWait, d.name+" to check "+from.name+"'s claim", func() bool {
			return claimHeld(d, from) != ""
		})
	}
	waitSame(t, converge, s.dirA, s.dirB)
	for _, d := range []*node{s.a, s.b} {
		if e := forkReport(d, s.r); e != "" {
			t.Fatalf("%s reports a fork of a single receiver: %s", d.name, e)
		}
		if strings.Contains(d.log.String(), "receiver forked its log") {
			t.Fatalf("%s logged a fork of a single receiver", d.name)
		}
	}
}

// claimHeld returns d's log line saying a claim of from's held, or "".
func claimHeld(d, from *node) string {
	for line := range strings.SplitSeq(d.log.String(), "\n") {
		if strings.Contains(line, "receiver claim holds") && strings.Contains(line, from.ID) {
			return line
		}
	}
	return ""
}

// TestReceiverForkAfterPrune: a receiver that pruned a device's newest
// record (another device's newer version of the file superseded it)
// still holds it by its high-water mark, so a fresh device, which never saw the
// record, takes the device's claim for true.
func TestReceiverForkAfterPrune(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, b, r := startNode(t, "a"), startNode(t, "b"), startNode(t, "r")
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	writeFile(t, filepath.Join(dirA, "x"), []byte("only a's record of x gets pruned"), 0o644)
	// Send-only: a never takes b's newer x, so its newest record stays
	// the one keep-last 1 drops.
	a.cli("folder", "add", "docs", dirA, "--type", "sendonly")
	holdFolder(t, r, "docs", a, b)
	pw := passwordFile(t, "pw")
	backUpTo(t, a, r, "docs", pw)
	waitBackedUp(t, a, r, "docs")

	// b gets x from the receiver alone, changes it, and keep-last 1 drops
	// the version a uploaded (with b's copy of it).
	b.cli("folder", "add", "docs", dirB)
	backUpTo(t, b, r, "docs", pw)
	waitSame(t, converge, dirA, dirB)
	waitBackedUp(t, b, r, "docs")
	writeFile(t, filepath.Join(dirB, "x"), []byte("b's newer x"), 0o644)
	b.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to hold b's newer x", func() bool {
		return r.encFolder("docs").Receiver.Records >= 3
	})
	waitBackedUp(t, b, r, "docs")
	r.cli("folder", "retention", "docs", "--keep-last", "1")
	if out := r.cli("prune", "docs", "--grace", "0s"); !strings.Contains(out, "dropped 2 versions") { // a's record and b's copy
		t.Fatalf("prune said %q", out)
	}

	// A fresh device e, paired with a, reads the pruned log.
	e := startNode(t, "e")
	dirE := filepath.Join(t.TempDir(), "e")
	e.cli("folder", "add", "docs", dirE)
	pairTrusted(t, a, e, "docs")
	r.cli("device", "add", e.ID, "--name", "e", "--address", e.Listen)
	r.cli("folder", "share", "docs", e.ID)
	backUpTo(t, e, r, "docs", pw)
	waitBackedUp(t, e, r, "docs")
	testutil.Eventually(t, forkWait, "e to check a's claim", func() bool { return claimHeld(e, a) != "" })
	line := claimHeld(e, a)
	t.Logf("e: %s", line)
	if !strings.Contains(line, "seen=0") {
		t.Fatalf("e saw a's pruned record, so the high-water mark was not put to the test: %s", line)
	}
	if rep := forkReport(e, r); rep != "" {
		t.Fatalf("a pruned record was reported as a fork: %s", rep)
	}
}
