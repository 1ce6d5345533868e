package test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

const converge = 60 * time.Second

// TestSyncThreeNodes covers the initial sync of a varied tree and then
// edits, deletes, renames and a directory move made on different nodes.
func TestSyncThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	a := filepath.Join(t.TempDir(), "seed")
	writeFile(t, filepath.Join(a, "empty"), nil, 0o644)
	writeFile(t, filepath.Join(a, "small.txt"), []byte("small file\n"), 0o600)
	writeFile(t, filepath.Join(a, "exec.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	writeFile(t, filepath.Join(a, "deep/er/still/nested.bin"), randomBytes(1, 3000), 0o644)
	writeFile(t, filepath.Join(a, "big/multi.bin"), randomBytes(2, 3<<20+12345), 0o644)
	writeFile(t, filepath.Join(a, "name with spaces.txt"), []byte("spaces"), 0o644)
	writeFile(t, filepath.Join(a, "ünïcödé/日本語.txt"), []byte("unicode"), 0o644)
	os.MkdirAll(filepath.Join(a, "empty-dir"), 0o755)
	os.Symlink("small.txt", filepath.Join(a, "link-to-small"))
	os.Symlink("/nonexistent/absolute", filepath.Join(a, "dangling"))

	c := newClusterWithSeed(t, 3, a)
	waitSame(t, converge, c.dirs...)
	if got := snapshot(t, c.dirs[1]); got["big/multi.bin"].Hash == "" || got["link-to-small"].Target != "small.txt" {
		t.Fatalf("initial sync incomplete: %+v", got)
	}

	checkStatusAfterSync(t, c)
	before := c.nodes[0].folder(t)
	// The seed's scan read each file once: the empty peers' polynomials,
	// arriving while it ran, did not make it start over.
	if seedBytes := int64(11 + 18 + 3000 + 3<<20 + 12345 + 6 + 7); before.HashedBytes != seedBytes {
		t.Errorf("a's scans read %d bytes, the seed has %d", before.HashedBytes, seedBytes)
	}

	// Changes on different nodes.
	b, cc := c.dirs[1], c.dirs[2]
	writeFile(t, filepath.Join(b, "small.txt"), []byte("edited on b\n"), 0o600)
	os.Remove(filepath.Join(cc, "exec.sh"))
	os.Rename(filepath.Join(c.dirs[0], "name with spaces.txt"), filepath.Join(c.dirs[0], "renamed.txt"))
	os.Rename(filepath.Join(b, "deep/er"), filepath.Join(b, "moved-er"))
	big := randomBytes(2, 3<<20+12345)
	big = append([]byte("prefix"), big...)
	writeFile(t, filepath.Join(cc, "big/multi.bin"), big, 0o644)
	waitSame(t, converge, c.dirs...)
	snap := snapshot(t, c.dirs[0])
	for _, gone := range []string{"exec.sh", "name with spaces.txt", "deep/er/still/nested.bin"} {
		if _, ok := snap[gone]; ok {
			t.Errorf("%s still present after its removal", gone)
		}
	}
	for _, want := range []string{"renamed.txt", "moved-er/still/nested.bin"} {
		if _, ok := snap[want]; !ok {
			t.Errorf("%s missing", want)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(c.dirs[0], "big/multi.bin")); !bytes.Equal(got, big) {
		t.Error("edited big file differs")
	}
	// The nodes adopted one chunking polynomial, so the big file's edit
	// moved a chunk or two, not the file.
	after := c.nodes[0].folder(t)
	if pulled := after.PulledBytes - before.PulledBytes; pulled > int64(len(big))/2 {
		t.Errorf("a pulled %d bytes for a 6-byte insert into a %d-byte file", pulled, len(big))
	}
	// Besides the big file, small.txt changed and nested.bin moved (copied
	// from its old place, or fetched if that is gone first): the insert at
	// the start changed at most the two chunks it can.
	if blocks := after.PulledBlocks - before.PulledBlocks; blocks < 2 || blocks > 4 {
		t.Errorf("a pulled %d blocks for a 6-byte insert, a small edit and a move, want 2 to 4", blocks)
	}
}

// newClusterWithSeed starts a cluster whose first node's folder starts as
// seed (moved into place), or empty when seed is "".
func newClusterWithSeed(t *testing.T, n int, seed string, types ...string) *cluster {
	t.Helper()
	c := &cluster{}
	for i := range n {
		name := string(rune('a' + i))
		c.nodes = append(c.nodes, startNode(t, name))
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), "folder-"+name))
	}
	if seed != "" {
		if err := os.Rename(seed, c.dirs[0]); err != nil {
			t.Fatal(err)
		}
	}
	for i, x := range c.nodes {
		for j, y := range c.nodes {
			if i != j {
				x.cli("device", "add", y.ID, "--name", y.name, "--address", y.Listen)
			}
		}
	}
	for i, x := range c.nodes {
		typ := "sendreceive"
		if i < len(types) {
			typ = types[i]
		}
		x.cli("folder", "add", "f", c.dirs[i], "--type", typ)
		for j, y := range c.nodes {
			if i != j {
				x.cli("folder", "share", "f", y.ID)
			}
		}
	}
	return c
}

// TestConflictKeepsBoth edits one file on two nodes while they are apart.
func TestConflictKeepsBoth(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2)
	a, b := c.dirs[0], c.dirs[1]
	writeFile(t, filepath.Join(a, "doc.txt"), []byte("original"), 0o644)
	waitSame(t, converge, c.dirs...)

	// Cut the link by removing each other, edit both, then reconnect.
	c.nodes[0].cli("device", "remove", c.nodes[1].ID)
	c.nodes[1].cli("device", "remove", c.nodes[0].ID)
	testutil.Eventually(t, 20*time.Second, "nodes to disconnect", func() bool {
		return !c.nodes[0].connectedTo(c.nodes[1].ID)
	})
	hashed := []int64{c.nodes[0].folder(t).HashedBytes, c.nodes[1].folder(t).HashedBytes}
	writeFile(t, filepath.Join(a, "doc.txt"), []byte("edit on a"), 0o644)
	writeFile(t, filepath.Join(b, "doc.txt"), []byte("edit on b, longer"), 0o644)
	c.nodes[0].cli("scan", "f")
	c.nodes[1].cli("scan", "f")
	// Each side records its own edit before they meet again: a scan read
	// it (HashedBytes grew) and ended (idle).
	for i, n := range c.nodes {
		testutil.Eventually(t, converge, n.name+" to scan its edit", func() bool {
			st := n.folder(t)
			return st.HashedBytes > hashed[i] && st.State == "idle"
		})
	}
	c.nodes[0].cli("device", "add", c.nodes[1].ID, "--address", c.nodes[1].Listen)
	c.nodes[1].cli("device", "add", c.nodes[0].ID, "--address", c.nodes[0].Listen)
	c.nodes[0].cli("folder", "share", "f", c.nodes[1].ID)
	c.nodes[1].cli("folder", "share", "f", c.nodes[0].ID)
	waitSame(t, converge, c.dirs...)

	snap := snapshot(t, a)
	var contents []string
	conflicts := 0
	for name, e := range snap {
		if e.Type != "file" {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(a, name))
		contents = append(contents, string(b))
		if strings.Contains(name, ".sync-conflict-") {
			conflicts++
			if !strings.HasPrefix(name, "doc.sync-conflict-") || !strings.HasSuffix(name, ".txt") {
				t.Errorf("conflict copy named %q", name)
			}
		}
	}
	if conflicts != 1 || len(contents) != 2 {
		t.Fatalf("want the winner and one conflict copy, got %v", snap)
	}
	joined := strings.Join(contents, "|")
	if !strings.Contains(joined, "edit on a") || !strings.Contains(joined, "edit on b, longer") {
		t.Fatalf("an edit was lost: %q", joined)
	}
}

// TestSendOnlyReceiveOnly: a sendonly node never takes changes, a
// receiveonly node never gives its own.
func TestSendOnlyReceiveOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := newCluster(t, 2, "sendonly", "receiveonly")
	src, dst := c.dirs[0], c.dirs[1]
	writeFile(t, filepath.Join(src, "from-source.txt"), []byte("source"), 0o644)
	testutil.Eventually(t, converge, "file to reach the receiveonly node", func() bool {
		b, err := os.ReadFile(filepath.Join(dst, "from-source.txt"))
		return err == nil && string(b) == "source"
	})
	// A local change on the receiveonly node stays there.
	writeFile(t, filepath.Join(dst, "local-only.txt"), []byte("mine"), 0o644)
	writeFile(t, filepath.Join(dst, "from-source.txt"), []byte("changed on receiver"), 0o644)
	c.nodes[1].cli("scan", "f")
	// A new file from the source still arrives, proving the link works...
	writeFile(t, filepath.Join(src, "second.txt"), []byte("two"), 0o644)
	testutil.Eventually(t, converge, "second file to arrive", func() bool {
		_, err := os.Stat(filepath.Join(dst, "second.txt"))
		return err == nil
	})
	time.Sleep(time.Second) // room for the receiveonly node's changes to go back, which they must not
	// ...and nothing went back.
	if _, err := os.Stat(filepath.Join(src, "local-only.txt")); err == nil {
		t.Error("a receiveonly node's new file reached the sendonly node")
	}
	if b, _ := os.ReadFile(filepath.Join(src, "from-source.txt")); string(b) != "source" {
		t.Errorf("the sendonly node took a change: %q", b)
	}
}

// checkStatusAfterSync: status --json shows a converged folder as the
// contract describes it.
func checkStatusAfterSync(t *testing.T, c *cluster) {
	t.Helper()
	var st struct {
		Folders []struct {
			ID          string `json:"id"`
			Type        string `json:"type"`
			State       string `json:"state"`
			LocalFiles  int64  `json:"localFiles"`
			LocalBytes  int64  `json:"localBytes"`
			GlobalFiles int64  `json:"globalFiles"`
			GlobalBytes int64  `json:"globalBytes"`
			NeedFiles   int64  `json:"needFiles"`
			NeedBytes   int64  `json:"needBytes"`
			Peers       []struct {
				Device     string  `json:"device"`
				Connected  bool    `json:"connected"`
				Completion float64 `json:"completion"`
			} `json:"peers"`
		} `json:"folders"`
	}
	testutil.Eventually(t, converge, "status to show every peer complete", func() bool {
		if err := json.Unmarshal([]byte(c.nodes[1].cli("status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Folders) != 1 {
			return false
		}
		f := st.Folders[0]
		if f.NeedFiles != 0 || f.LocalFiles != f.GlobalFiles || f.LocalBytes != f.GlobalBytes || f.LocalFiles == 0 || len(f.Peers) != len(c.nodes)-1 {
			return false
		}
		for _, p := range f.Peers {
			if !p.Connected || p.Completion != 100 {
				return false
			}
		}
		return f.ID == "f" && f.Type == "sendreceive" && f.State == "idle"
	})
}
