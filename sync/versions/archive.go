package versions

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"lockstep/sync/fsys"
)

// Dir is where versions live, relative to the folder root.
const Dir = fsys.InternalDir + "/versions"

// dirPerm is the mode of directories Save creates in the archive: the
// archive gathers files from everywhere in the folder, so it is private.
const dirPerm = 0o700

// Version is one archived version of a file.
type Version struct {
	Path    string    // the file's folder-relative name ("a/b.txt")
	ID      string    // opaque, stable: the archived file's name relative to Dir
	Time    time.Time // when it was archived (from its name), UTC
	Size    int64
	ModTime time.Time

	seq int // counter within Time's second, 1 for the first
}

// compare orders versions as List returns them: newest first, then by
// Path.
func (v Version) compare(w Version) int {
	if c := w.Time.Compare(v.Time); c != 0 {
		return c
	}
	if v.seq != w.seq {
		return w.seq - v.seq
	}
	return strings.Compare(v.Path, w.Path)
}

// Archive is a folder's version archive under Dir. It is safe for
// concurrent use.
type Archive struct {
	fs     fsys.FS
	policy Policy
	mu     sync.Mutex // serializes Save and Clean
}

// New returns the archive of the folder root, kept by policy p. It touches
// nothing until a method is called.
func New(root fsys.FS, p Policy) *Archive {
	return &Archive{fs: root, policy: p}
}

// Save moves the regular file name (a valid folder-relative name) into the
// archive, named <Dir>/<dir>/<stem>~YYYYMMDD-HHMMSS<ext> after now in UTC,
// or ~YYYYMMDD-HHMMSS-N<ext> for the N-th version saved in the same second.
// It is a rename within the folder, never a copy, and it keeps the file's
// mode and mtime; missing directories under Dir are created. It never
// replaces an archived file. Save does not flush: the caller's next
// durability barrier covers it.
//
// With policy none it does nothing and returns ErrNoVersioning. A name that
// is not a regular file fails with ErrNotFile, a missing one with
// fs.ErrNotExist; a symlink on the archive path fails with
// fsys.ErrSymlinkParent or fsys.ErrIsSymlink. On any error name is left
// where it was and the caller deletes or replaces it as without
// versioning, or stops.
func (a *Archive) Save(name string, now time.Time) error {
	return a.SaveFrom(name, name, now)
}

// SaveFrom is Save for the version of name that is now at src (the puller
// moves a replaced file aside before it decides what to do with it): it
// moves src into the archive as a version of name.
func (a *Archive) SaveFrom(src, name string, now time.Time) error {
	if !a.policy.active() {
		return ErrNoVersioning
	}
	if err := fsys.ValidName(name); err != nil {
		return fmt.Errorf("versioning: %w", err)
	}
	fi, err := a.fs.Lstat(src)
	if err != nil {
		return fmt.Errorf("versioning: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("versioning %q: %w", name, ErrNotFile)
	}
	dir, base := path.Split(name)
	archDir := path.Join(Dir, dir)
	a.mu.Lock() // Clean must not remove archDir between MkdirAll and Rename
	defer a.mu.Unlock()
	if err := a.fs.MkdirAll(archDir, dirPerm); err != nil {
		return fmt.Errorf("versioning %q: %w", name, err)
	}
	for seq := 1; seq <= maxSeq; seq++ {
		ab, err := archivedBase(base, now, seq)
		if err != nil {
			return fmt.Errorf("versioning %q: %w", name, err)
		}
		target := archDir + "/" + ab
		_, err = a.fs.Lstat(target)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("versioning %q: %w", name, err)
		}
		if err := a.fs.Rename(src, target); err != nil {
			return fmt.Errorf("versioning %q: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("versioning %q: more than %d versions in one second: %w", name, maxSeq, fs.ErrExist)
}

// List returns the versions of the file name, or of every file if name is
// "", newest first (ties by Path). It works whatever the policy, so
// versions kept under an earlier policy stay visible. Files in the archive
// that are not versions (see ParseID), symlinks and other non-regular files
// are skipped; an archive that does not exist yet is empty. A symlink on the
// way to a directory of the archive fails with fsys.ErrSymlinkParent.
func (a *Archive) List(name string) ([]Version, error) {
	var vs []Version
	if name == "" {
		if err := a.readDir("", true, &vs); err != nil {
			return nil, err
		}
	} else {
		if err := fsys.ValidName(name); err != nil {
			return nil, fmt.Errorf("listing versions: %w", err)
		}
		if err := a.readDir(path.Dir(name), false, &vs); err != nil {
			return nil, err
		}
		vs = slices.DeleteFunc(vs, func(v Version) bool { return v.Path != name })
	}
	slices.SortFunc(vs, Version.compare)
	return vs, nil
}

// readDir appends the versions in the archive directory rel ("" or "." for
// Dir) to vs, descending into subdirectories if deep. A directory that
// does not exist holds nothing.
func (a *Archive) readDir(rel string, deep bool, vs *[]Version) error {
	if rel == "." {
		rel = ""
	}
	dir := path.Join(Dir, rel)
	err := a.checkNoLinks(dir)
	var entries []fs.DirEntry
	if err == nil {
		entries, err = a.fs.ReadDir(dir)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing versions: %w", err)
	}
	for _, e := range entries {
		id := path.Join(rel, e.Name())
		switch {
		case e.Type().IsRegular():
			v, ok := a.version(id, e)
			if ok {
				*vs = append(*vs, v)
			}
		case e.IsDir() && deep:
			if err := a.readDir(id, true, vs); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkNoLinks checks that no component of the folder-relative directory
// dir is a symlink, so that the archive is read only where Save could
// have written it. Reads through fsys would otherwise follow symlinked
// parents that stay inside the folder.
func (a *Archive) checkNoLinks(dir string) error {
	for i := 0; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		fi, err := a.fs.Lstat(dir[:i])
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return &fs.PathError{Op: "read", Path: dir, Err: fmt.Errorf("%w: %s", fsys.ErrSymlinkParent, dir[:i])}
		}
	}
	return nil
}

// version describes the archived file id, if it is a version.
func (a *Archive) version(id string, e fs.DirEntry) (Version, bool) {
	name, t, seq, err := ParseID(id)
	if err != nil {
		return Version{}, false
	}
	fi, err := e.Info()
	if err != nil || !fi.Mode().IsRegular() {
		return Version{}, false
	}
	return Version{Path: name, ID: id, Time: t, Size: fi.Size(), ModTime: fi.ModTime(), seq: seq}, true
}

// Restore copies the version id to dst, a valid folder-relative name, and
// keeps the version's mtime and permission bits. It writes a temp file
// beside dst, flushes it and renames it over dst, so dst is either as it
// was or the whole version; missing parent directories of dst are
// created. Whatever is at dst is replaced (a non-empty directory makes the
// rename fail): the caller decides first what happens to it. The archived
// version stays. A malformed id fails with ErrInvalidID, a missing one with
// fs.ErrNotExist, one reached through a symlink with fsys.ErrSymlinkParent
// or fsys.ErrIsSymlink.
func (a *Archive) Restore(id, dst string) (err error) {
	if _, _, _, err := ParseID(id); err != nil {
		return fmt.Errorf("restoring: %w", err)
	}
	if err := fsys.ValidName(dst); err != nil {
		return fmt.Errorf("restoring: %w", err)
	}
	if err := a.checkNoLinks(path.Dir(Dir + "/" + id)); err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	src, err := a.fs.Open(Dir + "/" + id)
	if err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	if d := path.Dir(dst); d != "." {
		if err := a.fs.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("restoring %s: %w", id, err)
		}
	}
	tmp, tmpName, err := a.fs.CreateTemp(dst)
	if err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			a.fs.Remove(tmpName)
		}
	}()
	if _, err := io.Copy(tmp, src); err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	if err := a.fs.Chmod(tmpName, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	if err := a.fs.Chtimes(tmpName, fi.ModTime()); err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	if err := a.fs.Rename(tmpName, dst); err != nil {
		return fmt.Errorf("restoring %s: %w", id, err)
	}
	return nil
}
