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
