//go:build linux

package chaos

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"lockstep/sync/fsys"
)

// entry is what the scenarios compare of one name in a tree.
type entry struct {
	Type    string // file, dir, symlink; VANISHED if it went while read
	Mode    fs.FileMode
	Size    int64
	ModTime int64  // files only
	Hash    string // SHA-256 of a file's whole content
	Target  string // a symlink's
}

// tree is a folder as the scenarios see it: every name outside lockstep's
// internal directory, with lockstep's temp files listed apart.
type tree struct {
	entries map[string]entry
	temps   []string
}

// snapshot reads the tree under root.
func snapshot(root string) (tree, error) {
	tr := tree{entries: map[string]entry{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone while walking: a sync under way
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if rel == fsys.InternalDir {
			return filepath.SkipDir
		}
		if fsys.IsTemp(d.Name()) {
			tr.temps = append(tr.temps, rel)
			return nil
		}
		e, err := readEntry(p)
		if errors.Is(err, fs.ErrNotExist) {
			e, err = entry{Type: "VANISHED"}, nil
		}
		tr.entries[rel] = e
		return err
	})
	sort.Strings(tr.temps)
	return tr, err
}

func readEntry(p string) (entry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return entry{}, err
	}
	e := entry{Mode: fi.Mode().Perm()}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type, e.Mode = "symlink", 0
		e.Target, err = os.Readlink(p)
	case fi.IsDir():
		e.Type = "dir"
	default:
		e.Type, e.Size, e.ModTime = "file", fi.Size(), fi.ModTime().UnixNano()
		var b []byte
		b, err = os.ReadFile(p)
		e.Hash = hashOf(b)
	}
	return e, err
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// diffTrees describes how two trees differ, "" if their entries are equal
// (temp files aside).
func diffTrees(a, b tree) string {
	var diffs []string
	for k, ea := range a.entries {
		eb, ok := b.entries[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("only in first: %s %s", k, ea))
		case ea != eb:
			diffs = append(diffs, fmt.Sprintf("differs: %s %s vs %s", k, ea, eb))
		}
	}
	for k, eb := range b.entries {
		if _, ok := a.entries[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("only in second: %s %s", k, eb))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 15 {
		diffs = append(diffs[:15], fmt.Sprintf("... and %d more", len(diffs)-15))
	}
	return strings.Join(diffs, "\n")
}

func (e entry) String() string {
	switch e.Type {
	case "file":
		return fmt.Sprintf("file %v %d bytes mtime %d sha256 %.12s", e.Mode, e.Size, e.ModTime, e.Hash)
	case "symlink":
		return "symlink to " + e.Target
	}
	return e.Type
}

// files counts the regular files in a tree.
func (tr tree) files() int {
	n := 0
	for _, e := range tr.entries {
		if e.Type == "file" {
			n++
		}
	}
	return n
}

// member is a node and its copy of the folder.
type member struct {
	node *node
	dir  string
}

// converged reports whether every member shows the folder idle with
// nothing needed and every trusted peer connected and complete.
func converged(folder string, members []member) (bool, string) {
	var why []string
	for _, m := range members {
		var st status
		if err := m.node.getJSON("/rest/status", &st); err != nil {
			return false, err.Error()
		}
		found := false
		for _, f := range st.Folders {
			if f.ID != folder {
				continue
			}
			found = true
			if f.State != "idle" || f.NeedFiles+f.NeedDirectories != 0 || f.LocalFiles != f.GlobalFiles || f.LocalDirectories != f.GlobalDirectories {
				why = append(why, m.node.name+": "+f.describe())
				continue
			}
			for _, p := range f.Peers {
				if !p.Untrusted && (!p.Connected || p.Completion != 100) {
					why = append(why, m.node.name+": "+f.describe())
					break
				}
			}
		}
		if !found {
			why = append(why, m.node.name+": no folder "+folder)
		}
	}
	return len(why) == 0, strings.Join(why, "\n")
}

// waitConverged waits until the members have converged (see converged),
// hold identical trees, and both stay so for a second; it returns the
// tree and true. On timeout it fails the test with how they still
// differ, naming cause as the likely reason when given, and returns
// false.
func waitConverged(t testing.TB, timeout time.Duration, folder string, members []member, cause string) (tree, bool) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var last tree
	var lastAt time.Time
	for {
		ok, why := converged(folder, members)
		if ok {
			first, err := snapshot(members[0].dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range members[1:] {
				other, err := snapshot(m.dir)
				if err != nil {
					t.Fatal(err)
				}
				if d := diffTrees(first, other); d != "" {
					why = fmt.Sprintf("%s and %s differ:\n%s", members[0].node.name, m.node.name, d)
					ok = false
					break
				}
			}
			switch {
			case !ok:
			case lastAt.IsZero() || diffTrees(last, first) != "":
				last, lastAt = first, time.Now()
			case time.Since(lastAt) >= time.Second:
				t.Logf("converged %v after the last change", time.Since(start).Round(100*time.Millisecond))
				return first, true
			}
		}
		if !ok {
			lastAt = time.Time{}
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("no convergence within %v:\n%s", timeout, why)
			if cause != "" {
				msg += "\n(hint: " + cause + ")"
			}
			t.Error(msg)
			return tree{}, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkNoTemps fails the test if any member's folder still holds a
// lockstep temp file a few seconds after convergence. A partial file
// (kept to resume a pull) is named with the file it belongs to, when that
// is still in the tree.
func checkNoTemps(t testing.TB, members []member) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, m := range members {
		for {
			tr, err := snapshot(m.dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.temps) == 0 {
				break
			}
			if time.Now().After(deadline) {
				var what []string
				for _, tmp := range tr.temps {
					what = append(what, describeTemp(tmp, tr))
				}
				t.Errorf("%s: temp files left in the folder after it converged: %s", m.node.name, strings.Join(what, "; "))
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// describeTemp names a temp file and, for a partial file, what it is the
// partial file of.
func describeTemp(tmp string, tr tree) string {
	if !fsys.IsPartial(path.Base(tmp)) {
		return tmp
	}
	for name := range tr.entries {
		if fsys.PartialName(name) == tmp {
			return fmt.Sprintf("%s (a partial file kept to resume a pull of %s, which is complete)", tmp, name)
		}
	}
	return tmp + " (a partial file kept to resume a pull of a file no longer in the folder)"
}
