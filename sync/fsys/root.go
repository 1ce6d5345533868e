package fsys

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Root is a folder opened for the engine: the real FS. It is safe for
// concurrent use. Close releases it.
type Root struct {
	root            *os.Root
	dir             *os.File // the same directory, for the one-call paths (openBeneath and the like); nil if it has none
	caseInsensitive bool
}

var _ FS = (*Root)(nil)

// Open opens the directory dir as a Root and probes whether its filesystem
// is case-insensitive (see CaseInsensitive).
func Open(dir string) (*Root, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening folder: %w", err)
	}
	r := &Root{root: root}
	if haveOpenBeneath {
		// The root's directory itself (os.Root does not share its
		// descriptor); a failure only costs the fast path.
		if d, err := root.Open("."); err == nil {
			r.dir = d
		}
	}
	r.caseInsensitive = r.probeCase()
	return r, nil
}

// Close releases the directory. Files opened from r stay usable.
func (r *Root) Close() error {
	if r.dir != nil {
		r.dir.Close()
	}
	return r.root.Close()
}

// Lstat describes name without following a final symlink.
func (r *Root) Lstat(name string) (fs.FileInfo, error) {
	if err := checkPath(name, true); err != nil {
		return nil, pathError("lstat", name, err)
	}
	return r.root.Lstat(name)
}

// Open opens the regular file name read-only; see FS.
func (r *Root) Open(name string) (File, error) {
	if err := checkPath(name, false); err != nil {
		return nil, pathError("open", name, err)
	}
	f, err := r.openNoFollow("open", name, func(m fs.FileMode) error {
		if !m.IsRegular() {
			return ErrNotRegular
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &file{File: f, name: name}, nil
}

// ReadDir lists the directory name sorted by entry name; see FS.
func (r *Root) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := checkPath(name, true); err != nil {
		return nil, pathError("readdir", name, err)
	}
	d, err := r.openNoFollow("readdir", name, func(m fs.FileMode) error {
		if !m.IsDir() {
			return syscall.ENOTDIR
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, pathError("readdir", name, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// Readlink returns the target of the symlink name as stored.
func (r *Root) Readlink(name string) (string, error) {
	if err := checkPath(name, false); err != nil {
		return "", pathError("readlink", name, err)
	}
	return r.root.Readlink(name)
}

// tempAttempts bounds CreateTemp's retries on name collisions.
const tempAttempts = 16

// CreateTemp creates a new temp file beside name; see FS. The file starts
// with mode 0o600.
func (r *Root) CreateTemp(name string) (File, string, error) {
	dir := path.Dir(name)
	if r.dir != nil && checkPath(name, false) == nil {
		tmp := tempName(dir)
		if f, ok := createBeneath(r.dir, tmp); ok {
			return &file{File: f, name: tmp}, tmp, nil
		}
	}
	if err := r.checkWrite("createtemp", name); err != nil {
		return nil, "", err
	}
	var err error
	for range tempAttempts {
		tmp := tempName(dir)
		// O_EXCL: os.Root never follows a symlink when creating exclusively.
		var f *os.File
		f, err = r.root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return &file{File: f, name: tmp}, tmp, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	return nil, "", err
}

// tempName is a new random temp file name in dir.
func tempName(dir string) string {
	return path.Join(dir, fmt.Sprintf("%s%016x", TempPrefix, rand.Uint64()))
}

// Rename atomically replaces to with from; see FS.
func (r *Root) Rename(from, to string) error {
	if r.dir != nil && checkPath(from, false) == nil && checkPath(to, false) == nil && renameBeneath(r.dir, from, to) {
		return nil
	}
	if err := r.checkWrite("rename", from); err != nil {
		return err
	}
	if err := r.checkWrite("rename", to); err != nil {
		return err
	}
	return r.root.Rename(from, to)
}

// Remove removes a file, a symlink or an empty directory; see FS.
func (r *Root) Remove(name string) error {
	if r.dir != nil && checkPath(name, false) == nil && removeBeneath(r.dir, name) {
		return nil
	}
	if err := r.checkWrite("remove", name); err != nil {
		return err
	}
	return r.root.Remove(name)
}

// MkdirAll creates the directory name and missing parents; see FS.
func (r *Root) MkdirAll(name string, perm fs.FileMode) error {
	if err := checkPath(name, false); err != nil {
		return pathError("mkdir", name, err)
	}
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '/' {
			continue
		}
		if err := r.mkdirOne(name, name[:i], i == len(name), perm&fs.ModePerm); err != nil {
			return err
		}
	}
	return nil
}

// mkdirOne makes sure the directory prefix of name exists, is a directory
// and is not a symlink.
func (r *Root) mkdirOne(name, prefix string, last bool, perm fs.FileMode) error {
	for range 2 { // a second round if another process creates prefix meanwhile
		fi, err := r.root.Lstat(prefix)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = r.root.Mkdir(prefix, perm)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return err
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0 && last:
			return pathError("mkdir", name, ErrIsSymlink)
		case fi.Mode()&fs.ModeSymlink != 0:
			return pathError("mkdir", name, fmt.Errorf("%w: %s", ErrSymlinkParent, prefix))
		case !fi.IsDir():
			return pathError("mkdir", prefix, syscall.ENOTDIR)
		}
		return nil
	}
	return pathError("mkdir", prefix, fs.ErrExist)
}

// Symlink creates name as a symlink to target, stored as given; see FS.
func (r *Root) Symlink(target, name string) error {
	if err := r.checkWrite("symlink", name); err != nil {
		return err
	}
	return r.root.Symlink(target, name)
}

// Chmod sets the permission bits of name and does nothing on a symlink;
// see FS.
func (r *Root) Chmod(name string, mode fs.FileMode) error {
	if r.dir != nil && checkPath(name, false) == nil && chmodBeneath(r.dir, name, mode) {
		return nil
	}
	if err := r.checkWrite("chmod", name); err != nil {
		return err
	}
	fi, err := r.root.Lstat(name)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	return r.root.Chmod(name, mode&fs.ModePerm)
}

// Chtimes sets the modification and access times of name to mtime; see FS.
func (r *Root) Chtimes(name string, mtime time.Time) error {
	if r.dir != nil && checkPath(name, false) == nil && chtimesBeneath(r.dir, name, mtime) {
		return nil
	}
	if err := r.checkWrite("chtimes", name); err != nil {
		return err
	}
	return chtimesNoFollow(r.root, name, mtime)
}

// SyncDir flushes the directory name to stable storage.
func (r *Root) SyncDir(name string) error {
	if err := checkPath(name, true); err != nil {
		return pathError("syncdir", name, err)
	}
	d, err := r.openNoFollow("syncdir", name, func(m fs.FileMode) error {
		if !m.IsDir() {
			return syscall.ENOTDIR
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Sync is a durability barrier for the filesystem holding the folder. On
// Linux it is syncfs(2); on other systems it flushes only the folder's own
// directory, so callers there must also Sync the files they write.
func (r *Root) Sync() error {
	d, err := r.root.Open(".")
	if err != nil {
		return err
	}
	err = syncFilesystem(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkWrite checks name before a write: its structure, then that no parent
// component is a symlink. Each parent is checked with Lstat from the top
// down, so every Lstat resolves through directories already known not to
// be symlinks.
func (r *Root) checkWrite(op, name string) error {
	if err := checkPath(name, false); err != nil {
		return pathError(op, name, err)
	}
	for i := range len(name) {
		if name[i] != '/' {
			continue
		}
		fi, err := r.root.Lstat(name[:i])
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return pathError(op, name, fmt.Errorf("%w: %s", ErrSymlinkParent, name[:i]))
		}
	}
	return nil
}

// openNoFollow opens name read-only if Lstat shows no symlink and want
// accepts its type, then checks that the file opened is the one Lstat saw:
// os.Root would follow a symlink put in its place in between.
func (r *Root) openNoFollow(op, name string, want func(fs.FileMode) error) (*os.File, error) {
	if r.dir != nil {
		// One system call where the kernel can refuse every symlink and
		// every escape itself; whatever it refuses, or a file of the
		// wrong type, takes the careful way below, which also words the
		// error.
		if f := openBeneath(r.dir, name, want); f != nil {
			return f, nil
		}
	}
	fi, err := r.root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, pathError(op, name, ErrIsSymlink)
	}
	if err := want(fi.Mode()); err != nil {
		return nil, pathError(op, name, err)
	}
	f, err := r.root.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !os.SameFile(fi, st) {
		err = pathError(op, name, ErrReplaced)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func pathError(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// file is an open *os.File that reports its folder-relative name. The
// embedded *os.File keeps its fast paths (ReadFrom, WriteTo) for io.Copy.
type file struct {
	*os.File
	name string
}

// SetModeTime sets the permission bits and modification time of f, a
// file this package opened, through the open file: a pulled file's mode
// and time cost two name lookups each otherwise (a second of CPU in a
// pull of 100,000 files). It reports false, where it can't (another File,
// another system), and the caller sets them by name with Chmod and
// Chtimes. Call it after the last write.
func SetModeTime(f File, mode fs.FileMode, mtime time.Time) bool {
	of, ok := f.(*file)
	return ok && setModeTimeOpen(of.File, mode, mtime)
}

func (f *file) Name() string { return f.name }
