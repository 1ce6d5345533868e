package test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

// hostilePeer is a device speaking the real protocol that announces
// whatever the test wants and serves any content asked of it.
type hostilePeer struct {
	id      *crypt.Identity
	content []byte
}

func (h *hostilePeer) ClusterConfig(protocol.DeviceID, *protocol.ClusterConfig) error { return nil }
func (h *hostilePeer) Index(protocol.DeviceID, *protocol.Index) error                 { return nil }
func (h *hostilePeer) IndexUpdate(protocol.DeviceID, *protocol.IndexUpdate) error     { return nil }
func (h *hostilePeer) Closed(protocol.DeviceID, error)                                {}
func (h *hostilePeer) Request(_ context.Context, _ protocol.DeviceID, req *protocol.Request) ([]byte, error) {
	return h.content, nil
}

// TestHostilePeerNames: a trusted-but-malicious peer announces names that
// try to escape the folder, directly or through a symlink it also
// announces. Nothing may be written outside the folder, and the node keeps
// running.
func TestHostilePeerNames(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	n := startNode(t, "victim")
	base := t.TempDir()
	folder := filepath.Join(base, "folder")
	outside := filepath.Join(base, "outside")
	os.MkdirAll(outside, 0o755)

	hid, _, err := crypt.LoadOrCreateIdentity(t.TempDir(), "hostile")
	if err != nil {
		t.Fatal(err)
	}
	n.cli("device", "add", hid.ID.String(), "--name", "hostile")
	n.cli("folder", "add", "f", folder)
	n.cli("folder", "share", "f", hid.ID.String())

	nodeID, err := crypt.ParseDeviceID(n.ID)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(n.Listen, "tcp://")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(raw, crypt.ClientTLSConfig(hid, nodeID))
	if err := tc.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.ExchangeHello(ctx, tc, &protocol.Hello{DeviceName: "hostile", ClientName: "evil"}); err != nil {
		t.Fatal(err)
	}
	content := []byte("pwned")
	h := &hostilePeer{id: hid, content: content}
	conn := protocol.NewConn(protocol.DeviceID(nodeID), tc, h, protocol.Options{})
	go conn.Serve(ctx)
	defer conn.Close("done")

	err = conn.ClusterConfig(ctx, &protocol.ClusterConfig{Folders: []*protocol.Folder{{
		Id: "f",
		Devices: []*protocol.FolderDevice{
			{DeviceId: hid.ID[:], MaxSequence: 100, IndexId: 7},
			{DeviceId: nodeID[:]},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	hash := chunk.HashOf(content)
	file := func(name string, seq int64) *protocol.FileInfo {
		return &protocol.FileInfo{
			Name: name, Size: int64(len(content)), Permissions: 0o644, ModifiedNs: time.Now().UnixNano(),
			Version: &protocol.Vector{Counters: []*protocol.Counter{{Id: uint64(hid.ID.Short()), Value: 1}}}, Sequence: seq,
			Blocks: []*protocol.BlockInfo{{Offset: 0, Size: uint32(len(content)), Hash: hash[:]}},
		}
	}
	// tampered announces a file whose block hash the served content does
	// not match: the content must never be written.
	tampered := func(name string, seq int64) *protocol.FileInfo {
		fi := file(name, seq)
		other := chunk.HashOf([]byte("other"))
		fi.Blocks[0].Hash = other[:]
		return fi
	}
	link := func(name, target string, seq int64) *protocol.FileInfo {
		return &protocol.FileInfo{
			Name: name, Type: protocol.FileInfoType_FILE_INFO_TYPE_SYMLINK, SymlinkTarget: target,
			Version: &protocol.Vector{Counters: []*protocol.Counter{{Id: uint64(hid.ID.Short()), Value: 1}}}, Sequence: seq,
		}
	}
	files := []*protocol.FileInfo{
		file("../x", 1),
		file("/etc/x", 2),
		file(filepath.Join(outside, "abs"), 3),
		file("a/../../x", 4),
		file("a/./b", 5),
		file("nul\x00x", 6),
		file(".lockstep/versions/x", 7),
		link("s", outside, 8),
		link("up", "..", 9),
		link("root", "/", 10),
		file("ok.txt", 11), // an honest file proves the index was processed
	}
	if err := conn.Index(ctx, &protocol.Index{Folder: "f", Files: files}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the honest file and the symlinks to arrive", func() bool {
		b, err := os.ReadFile(filepath.Join(folder, "ok.txt"))
		if err != nil || string(b) != "pwned" {
			return false
		}
		for _, l := range []string{"s", "up", "root"} {
			if fi, err := os.Lstat(filepath.Join(folder, l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				return false
			}
		}
		return true
	})
	// Now names that go through the symlinks.
	err = conn.IndexUpdate(ctx, &protocol.IndexUpdate{Folder: "f", Files: []*protocol.FileInfo{
		file("s/x", 12),
		file("up/outside/x", 13),
		file("root/tmp/lockstep-hostile-x", 14),
		file("ok2.txt", 15),
		tampered("bad.txt", 16),
	}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the second honest file to arrive", func() bool {
		_, err := os.Stat(filepath.Join(folder, "ok2.txt"))
		return err == nil
	})
	// Give the hostile entries time to be attempted (they are retried).
	time.Sleep(2 * time.Second)

	if _, err := os.Lstat(filepath.Join(folder, "bad.txt")); err == nil {
		t.Error("a block that failed its hash check was written")
	}
	for name, e := range snapshot(t, folder) {
		if e.Type == "TEMP" {
			t.Errorf("temp file %s left behind by a failed pull", name)
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 0 {
		t.Errorf("something was written outside the folder: %v", entries)
	}
	for _, p := range []string{filepath.Join(base, "x"), "/etc/x", "/tmp/lockstep-hostile-x"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if _, err := os.Stat(filepath.Join(folder, ".lockstep", "versions", "x")); err == nil {
		t.Error("a peer wrote into the internal directory")
	}
	// The symlinks are stored as given and were never followed.
	if target, err := os.Readlink(filepath.Join(folder, "s")); err != nil || target != outside {
		t.Errorf("symlink s: %q %v", target, err)
	}
	// The node is alive and answers.
	if st := n.status(); st.DeviceID != n.ID {
		t.Fatalf("node status after the attack: %+v", st)
	}
}
