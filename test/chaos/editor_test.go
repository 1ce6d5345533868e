//go:build linux

package chaos

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"lockstep/sync/fsys"
)

// An editor changes one node's copy of a folder at random, the way a
// person with a text editor and a shell would, and logs enough to tell
// afterwards which of its writes must survive.
//
// Every file is lines of the form
//
//	<token> based-on=<token of the last line it read, or ->[ pad=<hex>]
//
// and every token is written once. Each write replaces the whole file
// atomically: the new content goes to a scratch file beside the folder
// (same filesystem, never seen by lockstep), which is then exchanged
// with the real name (renameat2 RENAME_EXCHANGE). The exchange hands back
// exactly what the write replaced, whatever a pull put there since the
// editor read it, so the log knows each token the editor removed. A
// delete moves the file out into the scratch directory first, for the
// same reason. A token is superseded only by such an act of an editor;
// every other token must survive somewhere, in the file or in a conflict
// copy.

// token lines; see above.
var lineRE = regexp.MustCompile(`^([AB]-[0-9]{6}) based-on=(-|[AB]-[0-9]{6})( pad=[0-9a-f]*)?$`)

// tokensOf returns the tokens of a file's content, and a description of
// the first thing wrong with it ("" if it is well formed). A file is
// never empty and always ends with a newline: anything else is torn.
func tokensOf(b []byte) ([]string, string) {
	if len(b) == 0 {
		return nil, "empty"
	}
	if b[len(b)-1] != '\n' {
		return nil, "no newline at the end"
	}
	var toks []string
	for i, l := range strings.Split(string(b[:len(b)-1]), "\n") {
		m := lineRE.FindStringSubmatch(l)
		if m == nil {
			if len(l) > 60 {
				l = l[:60] + "..."
			}
			return nil, fmt.Sprintf("line %d is %q", i+1, l)
		}
		toks = append(toks, m[1])
	}
	return toks, ""
}

// write is one token an editor wrote.
type write struct {
	token, based, op, name string
	at                     time.Time
}

// editLog is what one editor did. Only its editor touches it while the
// editor runs.
type editLog struct {
	editor     string
	writes     []write
	superseded map[string]string // token → the act that removed it
	contents   map[string]bool   // SHA-256 of every content written
	ops        map[string]int    // completed operations by kind
	races      []string          // writes that replaced a version the editor had not read
	torn       []string          // malformed files the editor read
	failures   []string          // unexpected errors
}

// editor is one random editor.
type editor struct {
	id      string // "A" or "B": its tokens' prefix
	root    string // the folder
	scratch string // beside the folder, on the same filesystem
	rng     *rand.Rand
	seq     int
	tmpSeq  int
	log     *editLog
}

func newEditor(id, root, scratch string, rng *rand.Rand) *editor {
	return &editor{id: id, root: root, scratch: scratch, rng: rng, log: &editLog{
		editor:     id,
		superseded: map[string]string{},
		contents:   map[string]bool{},
		ops:        map[string]int{},
	}}
}

// Names the editors use: a small space, so that both sides often touch
// the same names, and a few hot files touched far more often.
var (
	dirNames = []string{"d1", "d2", "d1/sub", "d3/deep/er"}
	hotNames = []string{"hot0.txt", "hot1.txt", "d1/hot2.txt"}
)

// ballastDir holds files the editors never touch: with them, the editors'
// deletions stay well below the share of the folder that makes a node
// stop before a mass deletion.
const ballastDir = "ballast"

// minFiles: below this many files the editor creates instead of deleting
// or renaming, so a peer's pull never looks like a mass deletion.
const minFiles = 16

func (e *editor) newName() string {
	dir := ""
	if e.rng.IntN(3) > 0 {
		dir = dirNames[e.rng.IntN(len(dirNames))] + "/"
	}
	return fmt.Sprintf("%sn%02d.txt", dir, e.rng.IntN(16))
}

// storm is a time when both editors hammer one file.
type storm struct {
	from, to time.Time
	name     string
}

// storms plans storms over the editing time from start to end: every 3
// to 5 s, one of 1 to 2 s on a hot file. Both editors get the same plan.
func storms(rng *rand.Rand, start, end time.Time) []storm {
	var out []storm
	for at := start.Add(2 * time.Second); at.Before(end); {
		d := time.Second + time.Duration(rng.IntN(1000))*time.Millisecond
		out = append(out, storm{from: at, to: at.Add(d), name: hotNames[rng.IntN(len(hotNames))]})
		at = at.Add(d + 3*time.Second + time.Duration(rng.IntN(2000))*time.Millisecond)
	}
	return out
}

// run edits until the deadline passes or maxOps operations were tried. Pauses are short and sometimes skipped, so
// that bursts of edits land in the same second; during a storm both
// editors append to or rewrite one file every few tens of milliseconds,
// so that each side's pulls keep meeting local changes.
func (e *editor) run(deadline time.Time, maxOps int, plan []storm) {
	burst, hot := 0, ""
	for i := 0; i < maxOps && time.Now().Before(deadline); i++ {
		for len(plan) > 0 && time.Now().After(plan[0].to) {
			plan = plan[1:]
		}
		if len(plan) > 0 && time.Now().After(plan[0].from) {
			op := "append"
			if e.rng.IntN(4) == 0 {
				op = "rewrite"
			}
			e.modify(op, plan[0].name)
			e.log.ops["storm"]++
			time.Sleep(time.Duration(5+e.rng.IntN(25)) * time.Millisecond)
			continue
		}
		e.step(hot)
		if burst > 0 {
			burst--
			continue
		}
		hot = ""
		if e.rng.IntN(25) == 0 {
			// A burst of edits of one hot file, as fast as they go.
			burst, hot = 3+e.rng.IntN(8), hotNames[e.rng.IntN(len(hotNames))]
			continue
		}
		time.Sleep(time.Duration(e.rng.IntN(120)) * time.Millisecond)
	}
}

// seedFiles creates n files, for a start with enough files that deletes
// are allowed.
func (e *editor) seedFiles(n int) {
	for range n {
		e.create(e.newName())
	}
}

// step does one random operation; a burst sends it to the hot file
// burst.
func (e *editor) step(burst string) {
	files, dirs := e.list()
	hot := e.rng.IntN(100) < 30
	pickFile := func() string {
		switch {
		case burst != "":
			return burst
		case hot || len(files) == 0:
			return hotNames[e.rng.IntN(len(hotNames))]
		}
		return files[e.rng.IntN(len(files))]
	}
	switch r := e.rng.IntN(100); {
	case r < 16:
		e.create(e.newName())
	case r < 44:
		e.modify("append", pickFile())
	case r < 58:
		e.modify("rewrite", pickFile())
	case r < 66:
		e.modify("truncate", pickFile())
	case r < 74:
		if len(files) < minFiles {
			e.create(e.newName())
			return
		}
		e.rename(files[e.rng.IntN(len(files))], e.newName())
	case r < 86:
		if len(files) < minFiles {
			e.create(e.newName())
			return
		}
		e.remove(pickFile())
	case r < 93:
		d := dirNames[e.rng.IntN(len(dirNames))]
		if err := os.MkdirAll(filepath.Join(e.root, d), 0o755); err == nil {
			e.log.ops["mkdir"]++
		}
	default:
		if len(dirs) > 0 {
			e.removeDir(dirs[e.rng.IntN(len(dirs))], len(files))
		}
	}
}

// list returns the folder's regular files and directories, lockstep's own
// entries left out.
func (e *editor) list() (files, dirs []string) {
	filepath.WalkDir(e.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == e.root {
			return nil
		}
		rel := filepath.ToSlash(p[len(e.root)+1:])
		switch {
		case rel == fsys.InternalDir, rel == ballastDir:
			return filepath.SkipDir
		case fsys.IsTemp(d.Name()):
		case d.IsDir():
			dirs = append(dirs, rel)
		case d.Type().IsRegular():
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	sort.Strings(dirs)
	return files, dirs
}
