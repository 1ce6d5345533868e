package test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"lockstep/test/testutil"
)

// entry is what the tests compare of one file in a tree.
type entry struct {
	Type    string
	Mode    fs.FileMode
	ModTime int64
	Hash    string
	Target  string
}

// snapshot describes a folder tree, leaving out lockstep's own internal
// directory and temp files.
func snapshot(t testing.TB, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // vanished while walking: a sync in progress
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if rel == ".lockstep" || strings.HasPrefix(rel, ".lockstep/") {
			return filepath.SkipDir
		}
		if strings.HasPrefix(d.Name(), ".lockstep-tmp-") {
			out[rel] = entry{Type: "TEMP"}
			return nil
		}
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		e := entry{Mode: fi.Mode().Perm()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Type, e.Mode = "symlink", 0
			e.Target, err = os.Readlink(p)
		case fi.IsDir():
			e.Type = "dir"
		default:
			e.Type = "file"
			e.ModTime = fi.ModTime().UnixNano()
			var b []byte
			b, err = os.ReadFile(p)
			sum := sha256.Sum256(b)
			e.Hash = hex.EncodeToString(sum[:8])
		}
		if errors.Is(err, fs.ErrNotExist) {
			// Replaced while we looked: mark it so a comparison retries.
			e = entry{Type: "VANISHED"}
			err = nil
		}
		out[rel] = e
		return err
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return out
}

// diffTrees returns a description of how two snapshots differ, "" if equal.
func diffTrees(a, b map[string]entry) string {
	var diffs []string
	for k, ea := range a {
		eb, ok := b[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("only in first: %s %+v", k, ea))
		case ea != eb:
			diffs = append(diffs, fmt.Sprintf("differs: %s %+v vs %+v", k, ea, eb))
		}
	}
	for k, eb := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("only in second: %s %+v", k, eb))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 12 {
		diffs = append(diffs[:12], fmt.Sprintf("... and %d more", len(diffs)-12))
	}
	return strings.Join(diffs, "\n")
}

// waitSame waits until all roots hold identical trees.
func waitSame(t testing.TB, timeout time.Duration, roots ...string) {
	t.Helper()
	diff := ""
	defer func() {
		if diff != "" { // the wait failed: show how the trees still differ
			t.Logf("the trees differ, %s", diff)
		}
	}()
	testutil.Eventually(t, timeout, "the trees to converge", func() bool {
		first := snapshot(t, roots[0])
		diff = ""
		for _, r := range roots[1:] {
			if d := diffTrees(first, snapshot(t, r)); d != "" {
				diff = fmt.Sprintf("%s vs %s:\n%s", roots[0], r, d)
				return false
			}
		}
		return true
	})
}

// writeFile writes content with a fixed mode and mtime, creating parents.
func writeFile(t testing.TB, path string, content []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// cluster is a set of nodes that all know each other and share a folder.
type cluster struct {
	nodes []*node
	dirs  []string
}

// newCluster starts n nodes, pairs them all, and shares folder "f" among
// them with the given types (sendreceive when types is shorter).
func newCluster(t *testing.T, n int, types ...string) *cluster {
	t.Helper()
	return newClusterWithSeed(t, n, "", types...)
}
