package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/sealed"
)

// Versions kept on receivers: a trusted device asks each connected
// receiver of a folder for the sealed records of a file (or of all),
// opens them, and lists or restores them like local versions.

// ReceiverVersion is one version of a file held by a receiver.
type ReceiverVersion struct {
	Path     string
	ID       string // "<origin hex>-<counter>": the record on the receiver
	Stored   time.Time
	Size     int64
	Deleted  bool
	Receiver crypt.DeviceID
	rec      index.Record
}

// maxVersionsAnswer bounds a receiver's answer to a versions request.
const maxVersionsAnswer = protocol.MaxRequestSize

// ReceiverVersions lists the versions of path ("" for every file) held by
// the folder's connected receivers, newest first. A version uploaded by
// two devices is listed once per receiver. Records that fail to open are
// counted as tampered and left out.
func (e *Engine) ReceiverVersions(ctx context.Context, folderID, name string) ([]ReceiverVersion, error) {
	f := e.folder(folderID)
	if f == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoFolder, folderID)
	}
	keys := f.keys(ctx)
	if keys == nil {
		return nil, nil // never shared with a receiver
	}
	var fileKey []byte
	if name != "" {
		fk := keys.FileKey(name)
		fileKey = fk[:]
	}
	var out []ReceiverVersion
	for _, dev := range f.connectedReceivers() {
		data, err := e.request(ctx, dev, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_VERSIONS, Folder: f.id, FileKey: fileKey, Size: maxVersionsAnswer})
		if err != nil {
			f.log.Warn("listing versions on a receiver", "device", dev.String(), "err", err)
			continue
		}
		var idx protocol.SealedIndex
		err = proto.Unmarshal(data, &idx)
		protocol.Recycle(data)
		if err != nil {
			f.log.Warn("a receiver's versions do not decode", "device", dev.String(), "err", err)
			continue
		}
		seen := map[string]bool{}
		for _, sr := range idx.GetRecords() {
			r, err := sealed.Open(keys, f.id, sr)
			if err != nil {
				f.tamperedRecords.Add(1)
				f.setReceiverError(dev, fmt.Errorf("a record from receiver %s failed verification (tampered or damaged): %w", dev.Short(), err))
				continue
			}
			key := r.Name + "\x00" + r.Version.String()
			if seen[key] {
				continue // the same version, uploaded by another device
			}
			seen[key] = true
			out = append(out, ReceiverVersion{
				Path: r.Name, ID: hex.EncodeToString(sr.GetOrigin()) + "-" + strconv.FormatUint(sr.GetCounter(), 10),
				Stored: time.Unix(0, sr.GetStoredNs()).UTC(), Size: r.Size, Deleted: r.Deleted, Receiver: dev, rec: r,
			})
		}
	}
	slices.SortStableFunc(out, func(a, b ReceiverVersion) int { return b.Stored.Compare(a.Stored) })
	return out, nil
}

// connectedReceivers lists the folder's receivers with a live connection.
func (f *folder) connectedReceivers() []crypt.DeviceID {
	f.mu.Lock()
	var out []crypt.DeviceID
	for d := range f.receivers {
		out = append(out, d)
	}
	f.mu.Unlock()
	return slices.DeleteFunc(out, func(d crypt.DeviceID) bool { return !f.e.connected(d) })
}

// IsReceiverVersion reports whether a version ID names a receiver's
// record (local version IDs are archived file names).
func IsReceiverVersion(id string) bool {
	origin, counter, ok := strings.Cut(id, "-")
	if !ok || len(origin) != 2*len(crypt.DeviceID{}) {
		return false
	}
	if _, err := hex.DecodeString(origin); err != nil {
		return false
	}
	_, err := strconv.ParseUint(counter, 10, 64)
	return err == nil
}

// RestoreFromReceiver writes versions kept on receivers back: each in
// place (the current file goes to versioning first, when it is on, and
// the folder rescans so the change syncs) or, with toDir, under toDir.
// Every chunk is opened and hash-checked; a version whose chunks cannot
// be fetched intact is not written.
func (e *Engine) RestoreFromReceiver(ctx context.Context, folderID string, vs []ReceiverVersion, toDir string) ([]string, error) {
	f := e.folder(folderID)
	if f == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoFolder, folderID)
	}
	dst := f.fs
	if toDir != "" {
		if err := os.MkdirAll(toDir, 0o755); err != nil {
			return nil, err
		}
		root, err := fsys.Open(toDir)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		dst = root
	}
	var files, bytes int64
	for _, v := range vs {
		if !v.Deleted {
			files, bytes = files+1, bytes+v.Size
		}
	}
	f.restoreFiles.Store(0)
	f.restoreBytes.Store(0)
	f.restoreFilesTotal.Store(files)
	f.restoreBytesTotal.Store(bytes)
	f.restoring.Store(true)
	defer f.restoring.Store(false)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.opts.Workers)
	done := make([]string, len(vs))
	for i, v := range vs {
		if v.Deleted {
			continue
		}
		g.Go(func() error {
			if err := f.writeVersion(gctx, dst, v, toDir == ""); err != nil {
				return fmt.Errorf("restoring %s: %w", v.Path, err)
			}
			f.restoreFiles.Add(1)
			f.restoreBytes.Add(v.Size)
			done[i] = v.Path
			if toDir != "" {
				done[i] = filepath.Join(toDir, filepath.FromSlash(v.Path))
			}
			return nil
		})
	}
	err := g.Wait()
	if toDir == "" {
		var names []string
		for _, v := range vs {
			names = append(names, v.Path)
		}
		f.requestScan(names)
	}
	return slices.DeleteFunc(done, func(s string) bool { return s == "" }), err
}

// writeVersion builds v in a temporary file of dst and renames it into
// place; inFolder says dst is the folder itself.
func (f *folder) writeVersion(ctx context.Context, dst *fsys.Root, v ReceiverVersion, inFolder bool) (err error) {
	r := v.rec
	if dir := path.Dir(r.Name); dir != "." {
		if err := dst.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	switch r.Type {
	case index.Dir:
		// It may exist already as the parent of a file restored first.
		if err := dst.MkdirAll(r.Name, fs.FileMode(r.Mode)); err != nil {
			return err
		}
		return dst.Chmod(r.Name, fs.FileMode(r.Mode))
	case index.Symlink:
		_ = dst.Remove(r.Name)
		return dst.Symlink(r.Target, r.Name)
	}
	out, tmp, err := dst.CreateTemp(r.Name)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			dst.Remove(tmp)
		}
	}()
	for _, b := range r.Blocks {
		data, err := f.blockFromReceiver(ctx, v.Receiver, b)
		if err != nil {
			return err
		}
		_, err = out.WriteAt(data, b.Offset)
		putBlock(data)
		if err != nil {
			return err
		}
	}
	if err := out.Truncate(r.Size); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := dst.Chmod(tmp, fs.FileMode(r.Mode)); err != nil {
		return err
	}
	if err := dst.Chtimes(tmp, time.Unix(0, r.ModTime)); err != nil {
		return err
	}
	if inFolder {
		if fi, err := dst.Lstat(r.Name); err == nil && fi.Mode().IsRegular() {
			if _, err := f.archived(r.Name); err != nil {
				return err
			}
		}
	}
	return dst.Rename(tmp, r.Name)
}

// blockFromReceiver fetches one block from a receiver, verified.
func (f *folder) blockFromReceiver(ctx context.Context, dev crypt.DeviceID, b index.Block) ([]byte, error) {
	data, err := f.requestSealed(ctx, dev, b)
	if err != nil {
		return nil, err
	}
	if len(data) != int(b.Size) || chunk.HashOf(data) != b.Hash {
		return nil, errors.New("a chunk from the receiver does not match its block")
	}
	return data, nil
}
