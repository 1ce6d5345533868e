package test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestFolderAddWait: `folder add --wait` returns once the first scan is
// done, with what it found, and says how it went on stderr.
func TestFolderAddWait(t *testing.T) {
	n := startNode(t, "a")
	dir := filepath.Join(t.TempDir(), "docs")
	for i := range 60 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("d%d/f%02d.txt", i%3, i)), randomBytes(uint64(i), 5000), 0o644)
	}
	res := run(t, n.home, "folder", "add", "docs", dir, "--wait", "--json")
	if res.code != 0 {
		t.Fatalf("folder add --wait: exit %d, stderr %q", res.code, res.stderr)
	}
	var st struct {
		State            string `json:"state"`
		LocalFiles       int64  `json:"localFiles"`
		LocalDirectories int64  `json:"localDirectories"`
		LocalBytes       int64  `json:"localBytes"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &st); err != nil {
		t.Fatalf("stdout %q: %v", res.stdout, err)
	}
	if st.State == "" || st.State == "scanning" || st.LocalFiles != 60 || st.LocalDirectories != 3 || st.LocalBytes != 60*5000 {
		t.Fatalf("after --wait: %+v", st)
	}
	if !strings.Contains(res.stderr, "scanned docs: 60 files, 3 directories") {
		t.Fatalf("stderr %q", res.stderr)
	}
}

// TestFolderAddWaitCannotStart: `folder add --wait` of a folder the node
// can't start fails with the reason, and status shows it: it used to
// report the folder scanned, idle and empty.
func TestFolderAddWaitCannotStart(t *testing.T) {
	n := startNode(t, "a")
	blocker := filepath.Join(t.TempDir(), "a-file")
	writeFile(t, blocker, []byte("not a directory"), 0o644)
	res := run(t, n.home, "folder", "add", "docs", filepath.Join(blocker, "docs"), "--wait")
	if res.code != 1 || !strings.Contains(res.stderr, "not a directory") {
		t.Fatalf("folder add --wait under a file: exit %d, stderr %q", res.code, res.stderr)
	}
	res = run(t, n.home, "folder", "list", "--json")
	if !strings.Contains(res.stdout, `"state": "error"`) || !strings.Contains(res.stdout, "starting the folder") {
		t.Fatalf("folder list after: %s", res.stdout)
	}
}
