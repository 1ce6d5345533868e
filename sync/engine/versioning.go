package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"lockstep/storage/db"
	"lockstep/sync/fsys"
	"lockstep/sync/versions"
)

// Versioning: a file that a peer's change replaces or deletes goes to the
// folder's archive first (sync/versions), when the folder has a policy.

// versionCleanInterval is how often a folder applies its versioning
// policy on its own (prune does it on demand).
const versionCleanInterval = time.Hour

// cleanVersions applies the folder's policy, on the folder's goroutine.
func (f *folder) cleanVersions() {
	f.mu.Lock()
	a := f.archive
	f.mu.Unlock()
	if a == nil {
		return
	}
	gone, err := a.Clean(time.Now())
	if err != nil {
		f.log.Warn("cleaning old versions", "err", err)
	}
	if len(gone) > 0 {
		f.log.Info("removed old versions", "count", len(gone))
	}
}

// ErrNoFolder means the folder is not running on this node.
var ErrNoFolder = errors.New("no such folder")

// versioningPolicy reads a folder's policy; none when unset.
func (e *Engine) versioningPolicy(ctx context.Context, folderID string) (versions.Policy, error) {
	p, err := e.db.VersioningPolicy(ctx, folderID)
	if errors.Is(err, db.ErrNotFound) {
		return versions.Policy{Type: versions.None}, nil
	}
	if err != nil {
		return versions.Policy{}, err
	}
	return versions.Policy{Type: versions.Type(p.Type), Keep: p.Keep, Days: p.Days}, nil
}

// Versioning returns a folder's versioning policy.
func (e *Engine) Versioning(ctx context.Context, folderID string) (versions.Policy, error) {
	if e.folder(folderID) == nil {
		return versions.Policy{}, fmt.Errorf("%w: %q", ErrNoFolder, folderID)
	}
	return e.versioningPolicy(ctx, folderID)
}

// SetVersioning sets a folder's versioning policy; it applies to the next
// replaced or deleted file.
func (e *Engine) SetVersioning(ctx context.Context, folderID string, p versions.Policy) error {
	f := e.folder(folderID)
	if f == nil {
		return fmt.Errorf("%w: %q", ErrNoFolder, folderID)
	}
	if err := e.db.SetVersioningPolicy(ctx, folderID, db.VersioningPolicy{Type: string(p.Type), Keep: p.Keep, Days: p.Days}); err != nil {
		return err
	}
	f.setArchive(versions.New(f.fs, p), p)
	return nil
}

// setArchive installs the folder's archive.
func (f *folder) setArchive(a *versions.Archive, p versions.Policy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.Type == versions.None {
		a = nil
	}
	f.archive = a
}

// archived moves name into the archive when versioning is on, and reports
// whether it did; the caller removes or replaces the file otherwise.
func (f *folder) archived(name string) (bool, error) {
	f.mu.Lock()
	a := f.archive
	f.mu.Unlock()
	if a == nil {
		return false, nil
	}
	if err := a.Save(name, time.Now()); err != nil {
		if errors.Is(err, versions.ErrNoVersioning) {
			return false, nil
		}
		return false, fmt.Errorf("keeping the old version: %w", err)
	}
	return true, nil
}

// archivedFrom is archived for the version of name now at src.
func (f *folder) archivedFrom(src, name string) (bool, error) {
	f.mu.Lock()
	a := f.archive
	f.mu.Unlock()
	if a == nil {
		return false, nil
	}
	if err := a.SaveFrom(src, name, time.Now()); err != nil {
		if errors.Is(err, versions.ErrNoVersioning) {
			return false, nil
		}
		return false, fmt.Errorf("keeping the old version: %w", err)
	}
	return true, nil
}

// archiveOf returns the folder's archive, even with versioning off (its
// versions stay listable and restorable).
func (e *Engine) archiveOf(ctx context.Context, folderID string) (*folder, *versions.Archive, error) {
	f := e.folder(folderID)
	if f == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrNoFolder, folderID)
	}
	p, err := e.versioningPolicy(ctx, folderID)
	if err != nil {
		return nil, nil, err
	}
	return f, versions.New(f.fs, p), nil
}

// Versions lists the kept versions of path ("" for all), newest first.
func (e *Engine) Versions(ctx context.Context, folderID, path string) ([]versions.Version, error) {
	_, a, err := e.archiveOf(ctx, folderID)
	if err != nil {
		return nil, err
	}
	return a.List(path)
}

// CleanVersions applies the folder's versioning policy now and returns
// the versions removed.
func (e *Engine) CleanVersions(ctx context.Context, folderID string) ([]versions.Version, error) {
	_, a, err := e.archiveOf(ctx, folderID)
	if err != nil {
		return nil, err
	}
	return a.Clean(time.Now())
}

// RestoreVersion puts version id of a file back. With toDir empty it
// replaces the file in the folder (the current one is archived first when
// versioning is on) and the folder rescans it, so it syncs like any
// change; else it is copied to toDir under its folder-relative path.
func (e *Engine) RestoreVersion(ctx context.Context, folderID, id, toDir string) (string, error) {
	f, a, err := e.archiveOf(ctx, folderID)
	if err != nil {
		return "", err
	}
	vs, err := a.List("")
	if err != nil {
		return "", err
	}
	var v *versions.Version
	for i := range vs {
		if vs[i].ID == id {
			v = &vs[i]
		}
	}
	if v == nil {
		return "", fmt.Errorf("%w: no version %q in folder %s", fs.ErrNotExist, id, folderID)
	}
	if toDir != "" {
		return restoreOutside(f.fs, *v, toDir)
	}
	if _, err := f.fs.Lstat(v.Path); err == nil {
		if _, err := f.archived(v.Path); err != nil {
			return "", err
		}
	}
	if err := a.Restore(v.ID, v.Path); err != nil {
		return "", err
	}
	f.requestScan([]string{v.Path})
	return v.Path, nil
}

// restoreOutside copies a version to toDir/<its path>, through a
// temporary file, keeping its modification time.
func restoreOutside(src *fsys.Root, v versions.Version, toDir string) (_ string, err error) {
	if err := os.MkdirAll(toDir, 0o755); err != nil {
		return "", err
	}
	dst, err := fsys.Open(toDir)
	if err != nil {
		return "", err
	}
	defer dst.Close()
	in, err := src.Open(versions.Dir + "/" + v.ID)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if dir := path.Dir(v.Path); dir != "." {
		if err := dst.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
	}
	out, tmp, err := dst.CreateTemp(v.Path)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			out.Close()
			dst.Remove(tmp)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return "", err
	}
	if err := out.Sync(); err != nil {
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	if err := dst.Chtimes(tmp, v.ModTime); err != nil {
		return "", err
	}
	if err := dst.Rename(tmp, v.Path); err != nil {
		return "", err
	}
	return filepath.Join(toDir, filepath.FromSlash(v.Path)), nil
}
