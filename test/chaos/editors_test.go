//go:build linux

package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestChaosTwoEditors: two trusted nodes share a folder while an editor on
// each side changes it at random (see editor). Once the editors stop and
// the nodes converge, every token no editor superseded must be in some
// file on both sides, every file must be a whole version an editor wrote,
// and no temp file may be left.
func TestChaosTwoEditors(t *testing.T) {
	endToEnd(t)
	rng := scenarioRand(t)
	editFor, maxOps, settle := 20*time.Second, 2000, 2*time.Minute
	if long() {
		editFor, maxOps, settle = 3*time.Minute, 30000, 5*time.Minute
	}

	base := t.TempDir()
	dirs := map[string]string{"a": filepath.Join(base, "a"), "b": filepath.Join(base, "b")}
	for _, d := range []string{"a", "b", "scratch-a", "scratch-b"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a, b := startNode(t, "a"), startNode(t, "b")
	pair(t, a, b, "f", dirs["a"], dirs["b"])
	members := []member{{a, dirs["a"]}, {b, dirs["b"]}}
	watches := map[string]*eventWatch{
		"a": watchEvents(t, a, "ConflictCreated", "FolderError"),
		"b": watchEvents(t, b, "ConflictCreated", "FolderError"),
	}
	editors := []*editor{
		newEditor("A", dirs["a"], filepath.Join(base, "scratch-a"), rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))),
		newEditor("B", dirs["b"], filepath.Join(base, "scratch-b"), rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))),
	}

	// A start with enough files that the editors may delete, and the
	// ballast.
	editors[0].seedFiles(2 * minFiles)
	for i := range 300 {
		p := filepath.Join(dirs["a"], ballastDir, fmt.Sprintf("%02d", i%10), fmt.Sprintf("b%03d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, randomBytes(rng, rng.IntN(4096)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := waitConverged(t, time.Minute, "f", members, ""); !ok {
		t.FailNow()
	}
	guard := releaseGuard(members, "f")
	defer guard.stop()

	t.Logf("editing for %v (at most %d operations per editor)", editFor, maxOps)
	deadline := time.Now().Add(editFor)
	plan := storms(rng, time.Now(), deadline)
	var wg sync.WaitGroup
	for _, e := range editors {
		wg.Go(func() { e.run(deadline, maxOps, plan) })
	}
	wg.Wait()
	for _, e := range editors {
		t.Logf("editor %s: %d tokens written; %s", e.id, len(e.log.writes), opCounts(e.log.ops))
	}

	final, ok := waitConverged(t, settle, "f", members,
		"if no error shows, a folder that silently stopped syncing; else a conflict it cannot resolve")
	guard.stop()
	if ok {
		checkNoTemps(t, members)
	}
	if n, errs := guard.result(); n > 0 || len(errs) > 0 {
		t.Logf("the mass deletion guard stopped a folder %d times; allowed each time, as a user would (errors: %v)", n, errs)
	}
	logs := []*editLog{editors[0].log, editors[1].log}
	dups := reportConflicts(t, final, watches)
	lostA := checkTokens(t, "a", dirs["a"], logs)
	lostB := checkTokens(t, "b", dirs["b"], logs)
	reportLost(t, "a", lostA, dups)
	if !slices.Equal(lostA, lostB) {
		reportLost(t, "b", lostB, dups)
	} else if len(lostB) > 0 {
		t.Errorf("b lost the same %d tokens", len(lostB))
	}
	for _, l := range logs {
		for _, f := range l.failures {
			t.Errorf("editor %s: %s", l.editor, f)
		}
		for _, torn := range l.torn {
			t.Errorf("editor %s read a partial file under a real name: %s", l.editor, torn)
		}
	}
}

// opCounts formats an editor's operation counts.
func opCounts(ops map[string]int) string {
	var parts []string
	for _, op := range []string{"create", "append", "rewrite", "truncate", "rename", "delete", "mkdir", "rmdir", "storm"} {
		parts = append(parts, fmt.Sprintf("%s %d", op, ops[op]))
	}
	return strings.Join(parts, ", ")
}

// checkTokens checks one side's folder against the editors' logs: each
// file must be a whole version an editor wrote. It returns the live
// tokens (written, and superseded by no editor) that are in no file, in
// the order they were written.
func checkTokens(t *testing.T, side, dir string, logs []*editLog) []write {
	t.Helper()
	tr, err := snapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	contents := map[string]bool{}
	superseded := map[string]string{}
	written := map[string]write{}
	races := 0
	for _, l := range logs {
		for h := range l.contents {
			contents[h] = true
		}
		for tok, why := range l.superseded {
			superseded[tok] = why
		}
		for _, w := range l.writes {
			written[w.token] = w
		}
		races += len(l.races)
	}
	present := map[string][]string{}
	var names []string
	for name := range tr.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if tr.entries[name].Type != "file" || strings.HasPrefix(name, ballastDir+"/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: reading %s: %v", side, name, err)
			continue
		}
		toks, bad := tokensOf(b)
		switch {
		case bad != "":
			t.Errorf("%s: %s is not a whole version (%s, %d bytes): a partial file under a real name", side, name, bad, len(b))
			continue
		case !contents[hashOf(b)]:
			t.Errorf("%s: %s holds content no editor wrote (%d bytes, tokens %v)", side, name, len(b), short(toks))
		}
		for _, tok := range toks {
			present[tok] = append(present[tok], name)
		}
	}
	var lost []write
	live := 0
	for tok, w := range written {
		if _, gone := superseded[tok]; gone {
			continue
		}
		live++
		if len(present[tok]) == 0 {
			lost = append(lost, w)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].token < lost[j].token })
	sort.SliceStable(lost, func(i, j int) bool { return lost[i].at.Before(lost[j].at) })
	t.Logf("%s: %d files (%d conflict copies); tokens: %d written, %d superseded by an editor, %d live, %d lost; %d writes replaced a version their editor had not read",
		side, tr.files(), conflictCopies(tr), len(written), len(superseded), live, len(lost), races)
	return lost
}

// reportLost fails the test with one side's lost tokens, the first ten in
// full, each with the known defect it looks like (dups: conflict copy
// names made more than once).
func reportLost(t *testing.T, side string, lost []write, dups map[string]bool) {
	t.Helper()
	for i, w := range lost {
		if i == 10 {
			t.Errorf("%s: ... and %d more lost tokens", side, len(lost)-i)
			break
		}
		hint := "a local write just before the puller's rename, or another loss"
		for name := range dups {
			if name == w.name || conflictStem(name) == conflictStem(w.name) {
				hint = "conflict copies of " + conflictStem(w.name) + " made in the same second overwrote each other"
			}
		}
		t.Errorf("%s: lost token %s: %s of %s at %s, based on %s; superseded by no editor, in no file now (likely: %s)",
			side, w.token, w.op, w.name, w.at.Format("15:04:05.000"), w.based, hint)
	}
}

func short(toks []string) []string {
	if len(toks) > 4 {
		return append(toks[:4:4], "...")
	}
	return toks
}

func conflictCopies(tr tree) int {
	n := 0
	for name, e := range tr.entries {
		if e.Type == "file" && isConflictCopy(name) {
			n++
		}
	}
	return n
}

// reportConflicts logs the conflicts the nodes announced and fails on
// two conflict copies made under one name: the second overwrote the
// first. It returns those names.
func reportConflicts(t *testing.T, final tree, watches map[string]*eventWatch) map[string]bool {
	t.Helper()
	all := map[string]bool{}
	for _, side := range []string{"a", "b"} {
		w := watches[side]
		if w.err != "" {
			t.Logf("%s: no event stream: %s", side, w.err)
			continue
		}
		made := map[string]int{}
		for _, ev := range w.of("ConflictCreated") {
			made[ev.Data.ConflictName]++
		}
		var dups []string
		for name, n := range made {
			if n > 1 {
				dups = append(dups, fmt.Sprintf("%s (%d times)", name, n))
				all[name] = true
			}
		}
		sort.Strings(dups)
		errs := w.of("FolderError")
		t.Logf("%s: %d conflicts announced (ConflictCreated), %d FolderError events", side, len(w.of("ConflictCreated")), len(errs))
		for i, ev := range errs {
			if i == 5 {
				break
			}
			t.Logf("%s: FolderError %s: %s", side, ev.Data.Name, ev.Data.Error)
		}
		if len(dups) > 0 {
			t.Errorf("%s made several conflict copies under one name, each overwriting the last (conflict copies made in the same second): %s",
				side, strings.Join(dups, ", "))
		}
	}
	if final.entries != nil {
		t.Logf("conflict copies kept: %d", conflictCopies(final))
	}
	return all
}

// conflictStem is the name a conflict copy was made of, or name itself.
func conflictStem(name string) string {
	for {
		i := strings.Index(name, ".sync-conflict-")
		if i < 0 {
			return name
		}
		// name.sync-conflict-YYYYMMDD-HHMMSS-DEVICE[...].ext
		rest := name[i+len(".sync-conflict-"):]
		ext := ""
		if j := strings.LastIndex(rest, "."); j >= 0 {
			ext = rest[j:]
		}
		name = name[:i] + ext
	}
}

// guardRelease plays the user who lets a folder go on after it stopped
// before a mass deletion: the editors delete and rename a lot, and a node
// may take that for a wiped disk.
type guardRelease struct {
	stopOnce sync.Once
	quit     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	released int
	errs     []string
}

// releaseGuard starts releasing members' folder whenever it stops before
// a mass deletion, until stop.
func releaseGuard(members []member, folder string) *guardRelease {
	g := &guardRelease{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-g.quit:
				return
			case <-tick.C:
			}
			for _, m := range members {
				var st status
				if err := m.node.getJSON("/rest/status", &st); err != nil {
					continue
				}
				for _, f := range st.Folders {
					if f.ID != folder || f.State != "error" || !strings.Contains(f.Error, "allow-deletes") {
						continue
					}
					err := m.node.post("/rest/folders/"+folder+"/allow-deletes", nil)
					g.mu.Lock()
					if err != nil {
						g.errs = append(g.errs, err.Error())
					} else {
						g.released++
					}
					g.mu.Unlock()
				}
			}
		}
	}()
	return g
}

func (g *guardRelease) stop() {
	g.stopOnce.Do(func() { close(g.quit) })
	<-g.done
}

func (g *guardRelease) result() (int, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.released, g.errs
}
