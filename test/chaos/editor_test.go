//go:build linux

package chaos

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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

// run edits until stop is closed, the deadline passes or maxOps
// operations were tried. Pauses are short and sometimes skipped, so
// that bursts of edits land in the same second; during a storm both
// editors append to or rewrite one file every few tens of milliseconds,
// so that each side's pulls keep meeting local changes.
func (e *editor) run(stop <-chan struct{}, deadline time.Time, maxOps int, plan []storm) {
	burst, hot := 0, ""
	for i := 0; i < maxOps && time.Now().Before(deadline); i++ {
		select {
		case <-stop:
			return
		default:
		}
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

// removeDir removes a directory that holds six files at most, as
// rm -r would: its files one by one (each a delete), then the
// directories, deepest first. A directory holding more is left alone.
func (e *editor) removeDir(dir string, files int) {
	var inside, subdirs []string
	filepath.WalkDir(filepath.Join(e.root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel := filepath.ToSlash(p[len(e.root)+1:])
		switch {
		case d.IsDir():
			subdirs = append(subdirs, rel)
		case d.Type().IsRegular() && !fsys.IsTemp(d.Name()):
			inside = append(inside, rel)
		}
		return nil
	})
	if len(inside) > 6 || files-len(inside) < minFiles {
		return
	}
	for _, name := range inside {
		e.remove(name)
	}
	for i := len(subdirs) - 1; i >= 0; i-- {
		// Fails if a pull put something there meanwhile.
		if err := os.Remove(filepath.Join(e.root, subdirs[i])); err != nil {
			return
		}
	}
	e.log.ops["rmdir"]++
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

func (e *editor) nextToken() string {
	e.seq++
	return fmt.Sprintf("%s-%06d", e.id, e.seq)
}

// line is one token line; now and then it carries a pad of up to a few
// hundred KiB, so some files span several blocks.
func (e *editor) line(tok, based string) []byte {
	n := e.rng.IntN(40)
	if e.rng.IntN(20) == 0 {
		n = 32<<10 + e.rng.IntN(150<<10)
	}
	pad := make([]byte, n)
	for i := range pad {
		pad[i] = byte(e.rng.Uint32())
	}
	return fmt.Appendf(nil, "%s based-on=%s pad=%s\n", tok, based, hex.EncodeToString(pad))
}

// scratchFile writes content to a new scratch file and returns its path.
func (e *editor) scratchFile(content []byte) (string, error) {
	e.tmpSeq++
	p := filepath.Join(e.scratch, fmt.Sprintf("s%d", e.tmpSeq))
	if content == nil {
		return p, nil
	}
	e.log.contents[hashOf(content)] = true
	return p, os.WriteFile(p, content, 0o644)
}

func (e *editor) fail(format string, args ...any) {
	e.log.failures = append(e.log.failures, fmt.Sprintf(format, args...))
}

func (e *editor) wrote(op, name, tok, based string) {
	e.log.writes = append(e.log.writes, write{token: tok, based: based, op: op, name: name, at: time.Now()})
	e.log.ops[op]++
}

// create makes a new file; if the name is taken, it appends to it instead.
func (e *editor) create(name string) {
	tok := e.nextToken()
	tmp, err := e.scratchFile(e.line(tok, "-"))
	if err != nil {
		e.fail("create %s: %v", name, err)
		return
	}
	defer os.Remove(tmp)
	abs := filepath.Join(e.root, name)
	for range 3 {
		os.MkdirAll(filepath.Dir(abs), 0o755)
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, abs, unix.RENAME_NOREPLACE)
		switch {
		case err == nil:
			e.wrote("create", name, tok, "-")
			return
		case errors.Is(err, syscall.EEXIST):
			e.modify("append", name)
			return
		case errors.Is(err, syscall.ENOENT):
			continue // the directory went meanwhile (a pulled rmdir)
		default:
			e.fail("create %s: %v", name, err)
			return
		}
	}
}

// modify appends a line to a file, rewrites it as one new line, or
// truncates it to some of its lines and adds one: each time based on the
// last token it read. A name that does not exist is created.
func (e *editor) modify(op, name string) {
	abs := filepath.Join(e.root, name)
	f, err := os.Open(abs)
	if errors.Is(err, fs.ErrNotExist) {
		e.create(name)
		return
	}
	if err != nil {
		e.fail("%s %s: %v", op, name, err)
		return
	}
	// Held open until the exchange, so its inode number is not reused.
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	old, err := io.ReadAll(f)
	if err != nil {
		e.fail("%s %s: reading: %v", op, name, err)
		return
	}
	toks, bad := tokensOf(old)
	if bad != "" {
		e.log.torn = append(e.log.torn, fmt.Sprintf("%s at %s: %s (%d bytes)", name, time.Now().Format("15:04:05.000"), bad, len(old)))
		return
	}
	based := toks[len(toks)-1]
	tok := e.nextToken()
	var content []byte
	switch op {
	case "append":
		content = append(old, e.line(tok, based)...)
	case "rewrite":
		content = e.line(tok, based)
	case "truncate":
		lines := strings.SplitAfter(string(old), "\n")
		keep := e.rng.IntN(len(lines) - 1) // lines ends with ""
		content = append([]byte(strings.Join(lines[:keep], "")), e.line(tok, based)...)
	}
	e.put(op, name, tok, based, content, inodeOf(fi))
}

// put replaces name with content atomically and records which tokens the
// replaced file held that content does not. readIno is the inode the
// content was based on.
func (e *editor) put(op, name, tok, based string, content []byte, readIno uint64) {
	tmp, err := e.scratchFile(content)
	if err != nil {
		e.fail("%s %s: %v", op, name, err)
		return
	}
	defer os.Remove(tmp)
	abs := filepath.Join(e.root, name)
	for range 3 {
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, abs, unix.RENAME_EXCHANGE)
		if errors.Is(err, syscall.ENOENT) {
			// The file went since it was read (a pulled delete or rename):
			// the write makes it anew, as an editor saving would.
			os.MkdirAll(filepath.Dir(abs), 0o755)
			err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, abs, unix.RENAME_NOREPLACE)
			if errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOENT) {
				continue
			}
			if err != nil {
				e.fail("%s %s: %v", op, name, err)
				return
			}
			e.wrote(op, name, tok, based)
			return
		}
		break
	}
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EEXIST) {
			e.fail("%s %s: %v", op, name, err)
		}
		return
	}
	// tmp now holds what name held.
	fi, err := os.Lstat(tmp)
	if err != nil {
		e.fail("%s %s: the replaced file: %v", op, name, err)
		return
	}
	if !fi.Mode().IsRegular() {
		// A directory or link took the name meanwhile: give it back.
		if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, abs, unix.RENAME_EXCHANGE); err != nil {
			e.fail("%s %s: putting back a %v: %v", op, name, fi.Mode().Type(), err)
		}
		return
	}
	replaced, err := os.ReadFile(tmp)
	if err != nil {
		e.fail("%s %s: reading the replaced file: %v", op, name, err)
		return
	}
	e.wrote(op, name, tok, based)
	if inodeOf(fi) != readIno {
		e.log.races = append(e.log.races, fmt.Sprintf("%s of %s by %s replaced a version pulled after it was read", op, name, tok))
	}
	e.supersede(replaced, content, fmt.Sprintf("%s of %s by %s", op, name, tok))
}

// supersede records the tokens of old that are not in new as removed by
// act.
func (e *editor) supersede(old, new []byte, act string) {
	oldToks, bad := tokensOf(old)
	if bad != "" {
		e.log.torn = append(e.log.torn, fmt.Sprintf("replaced by %s: %s (%d bytes)", act, bad, len(old)))
		return
	}
	kept := map[string]bool{}
	if new != nil {
		newToks, _ := tokensOf(new)
		for _, t := range newToks {
			kept[t] = true
		}
	}
	for _, t := range oldToks {
		if !kept[t] {
			e.log.superseded[t] = act
		}
	}
}

// rename moves a file to a name that is free.
func (e *editor) rename(from, to string) {
	if from == to {
		return
	}
	dst := filepath.Join(e.root, to)
	os.MkdirAll(filepath.Dir(dst), 0o755)
	err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(e.root, from), unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		e.log.ops["rename"]++
	case errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENOENT):
	default:
		e.fail("rename %s to %s: %v", from, to, err)
	}
}

// remove deletes a file: it is moved out first, so the log knows what
// was deleted, whatever a pull put there since the editor looked.
func (e *editor) remove(name string) {
	tmp, _ := e.scratchFile(nil)
	abs := filepath.Join(e.root, name)
	if err := os.Rename(abs, tmp); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			e.fail("delete %s: %v", name, err)
		}
		return
	}
	defer os.Remove(tmp)
	fi, err := os.Lstat(tmp)
	if err != nil {
		e.fail("delete %s: %v", name, err)
		return
	}
	if !fi.Mode().IsRegular() {
		if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, abs, unix.RENAME_NOREPLACE); err != nil {
			e.fail("delete %s: putting back a %v: %v", name, fi.Mode().Type(), err)
		}
		return
	}
	old, err := os.ReadFile(tmp)
	if err != nil {
		e.fail("delete %s: %v", name, err)
		return
	}
	e.log.ops["delete"]++
	e.supersede(old, nil, "delete of "+name+" by "+e.id)
}

func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// isConflictCopy reports whether name is a conflict copy's.
func isConflictCopy(name string) bool {
	return strings.Contains(path.Base(name), ".sync-conflict-")
}
