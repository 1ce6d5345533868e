package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// TestHostileReceiverClaimsHuge: an untrusted receiver of a folder says it
// holds the node's records up to counter 2^63-101, while its log is empty
// and it never serves one back. The node must not renumber its index past
// that claim (a hundred more records and sequences would go negative, and
// every scan fail): the receiver's peer entry shows an error about the
// claim, and the folder keeps scanning and uploading with sequences of
// its own.
func TestHostileReceiverClaimsHuge(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "victim")
	dir := filepath.Join(t.TempDir(), "f")
	writeFiles(t, dir, map[string]string{"a.txt": "before the receiver\n"})
	n.cli("folder", "add", "f", dir)
	home := filepath.Join(t.TempDir(), "hostile")
	rid := shareWithHostile(t, n, home, "f", true)

	h := startHostile(t, "receiver-claims-huge", n, home, "f", "-duration", "2m")
	h.wait(20*time.Second, "the receiver to connect", func(l hostileLine) bool { return l.Event == "connected" })
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("correct horse battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cli("folder", "share", "f", rid, "--password-file", pw)
	h.wait(20*time.Second, "the envelope to be stored", func(l hostileLine) bool { return l.Event == "envelope-put" && l.Stored })

	peerError := func() string {
		for _, p := range folderState(t, n, "f").Peers {
			if p.Device == rid {
				return p.Error
			}
		}
		return ""
	}
	testutil.Eventually(t, 20*time.Second, "the receiver's false claim to show on its peer entry", func() bool {
		return strings.Contains(strings.ToLower(peerError()), "claim")
	})
	t.Logf("the receiver's peer entry: %s", peerError())

	for i, name := range []string{"b.txt", "c.txt"} {
		writeFiles(t, dir, map[string]string{name: "after the claim\n"})
		testutil.Eventually(t, 20*time.Second, name+" to be indexed", func() bool {
			return folderState(t, n, "f").LocalFiles == int64(2+i)
		})
	}
	// What the node uploads is numbered with its own sequences.
	l := h.wait(20*time.Second, "the node to upload its records", func(l hostileLine) bool {
		return l.Event == "sealed-index" && l.Highest >= 3
	})
	if l.Highest > 1<<32 {
		t.Errorf("the node numbers its records past the receiver's claim: counter %d", l.Highest)
	}
	if f := folderState(t, n, "f"); f.State == "error" || f.Error != "" {
		t.Errorf("folder status after the claim: %+v", f)
	}
	for _, bad := range []string{"negative sequence", "scan failed"} {
		if lines := logLines(n, bad); len(lines) > 0 {
			t.Errorf("the node's log has %q: %s", bad, lines[0])
		}
	}
}
