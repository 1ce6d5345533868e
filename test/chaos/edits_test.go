//go:build linux

package chaos

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lockstep/sync/fsys"
)

// The editor's operations. Each replaces whole files atomically and logs
// the tokens it wrote and the tokens it removed (see editor).

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

// scratchFile writes content to a new scratch file and returns its path;
// for nil content it only picks a new path.
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
