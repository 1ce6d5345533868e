package backup

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
	"lockstep/storage/db"
	"lockstep/sync/check"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
	"lockstep/sync/sealed"
)

// Versions kept on receivers: a trusted device asks each connected
// receiver of a folder for the sealed records of a file (or of all),
// opens them, and lists or restores them like local versions.

// ErrNoFolder means no such folder runs here; it is a db.ErrNotFound.
var ErrNoFolder = fmt.Errorf("no such folder (%w)", db.ErrNotFound)

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
func (b *Backup) ReceiverVersions(ctx context.Context, folderID, name string) ([]ReceiverVersion, error) {
	f := b.folders.Folder(folderID)
	if f == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoFolder, folderID)
	}
	sh := b.share(folderID)
	keys := b.keys(ctx, folderID)
	if keys == nil {
		return nil, nil // never shared with a receiver
	}
	var fileKey []byte
	if name != "" {
		fk := keys.FileKey(name)
		fileKey = fk[:]
	}
	var out []ReceiverVersion
	for _, dev := range f.Receivers() {
		if !b.net.Connected(dev) {
			continue
		}
		data, err := b.net.RequestPeer(ctx, dev, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_VERSIONS, Folder: folderID, FileKey: fileKey, Size: maxVersionsAnswer})
		if err != nil {
			f.Log().Warn("listing versions on a receiver", "device", dev.String(), "err", err)
			continue
		}
		var idx protocol.SealedIndex
		err = proto.Unmarshal(data, &idx)
		protocol.Recycle(data)
		if err != nil {
			f.Log().Warn("a receiver's versions do not decode", "device", dev.String(), "err", err)
			continue
		}
		seen := map[string]bool{}
		for _, sr := range idx.GetRecords() {
			r, err := sealed.Open(keys, folderID, sr)
			if err != nil {
				sh.tamperedRecords.Add(1)
				sh.setReceiverError(dev, fmt.Errorf("a record from receiver %s failed verification (tampered or damaged): %w", dev.Short(), err))
				continue
			}
			key := r.Name + "\x00" + r.Version.String()
			if seen[key] {
				continue // the same version, uploaded by another device
			}
			seen[key] = true
			out = append(out, ReceiverVersion{
				Path: r.Name, ID: check.VersionID(sr.GetOrigin(), sr.GetCounter()),
				Stored: time.Unix(0, sr.GetStoredNs()).UTC(), Size: r.Size, Deleted: r.Deleted, Receiver: dev, rec: r,
			})
		}
	}
	slices.SortStableFunc(out, func(a, b ReceiverVersion) int { return b.Stored.Compare(a.Stored) })
	return out, nil
}

// ContentID identifies the version's content as index.ContentID does:
// the SHA-256 of its chunks' hashes in order, in hex. Two versions with
// the same content have the same ID, on any receiver; a deletion has
// none.
func (v ReceiverVersion) ContentID() string {
	if v.Deleted {
		return ""
	}
	return index.ContentID(v.rec.Blocks)
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
func (b *Backup) RestoreFromReceiver(ctx context.Context, folderID string, vs []ReceiverVersion, toDir string) ([]string, error) {
	f := b.folders.Folder(folderID)
	if f == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoFolder, folderID)
	}
	sh := b.share(folderID)
	dst := f.Root()
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
	sh.restoreFiles.Store(0)
	sh.restoreBytes.Store(0)
	sh.restoreFilesTotal.Store(files)
	sh.restoreBytesTotal.Store(bytes)
	sh.restoring.Store(true)
	defer sh.restoring.Store(false)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.opts.Workers)
	done := make([]string, len(vs))
	for i, v := range vs {
		if v.Deleted {
			continue
		}
		g.Go(func() error {
			if err := b.writeVersion(gctx, f, dst, v, toDir == ""); err != nil {
				return fmt.Errorf("restoring %s: %w", v.Path, err)
			}
			sh.restoreFiles.Add(1)
			sh.restoreBytes.Add(v.Size)
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
		f.RequestScan(names)
	}
	return slices.DeleteFunc(done, func(s string) bool { return s == "" }), err
}

// writeVersion builds v in a temporary file of dst and renames it into
// place; inFolder says dst is the folder itself.
func (b *Backup) writeVersion(ctx context.Context, f Folder, dst *fsys.Root, v ReceiverVersion, inFolder bool) (err error) {
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
	for _, blk := range r.Blocks {
		data, err := b.blockFromReceiver(ctx, f.ID(), v.Receiver, blk)
		if err != nil {
			return err
		}
		_, err = out.WriteAt(data, blk.Offset)
		protocol.Recycle(data)
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
			if err := f.Archive(r.Name); err != nil {
				return err
			}
		}
	}
	return dst.Rename(tmp, r.Name)
}

// blockFromReceiver fetches one block from a receiver, verified.
func (b *Backup) blockFromReceiver(ctx context.Context, folderID string, dev crypt.DeviceID, blk index.Block) ([]byte, error) {
	data, err := b.SealedBlock(ctx, folderID, dev, blk)
	if err != nil {
		return nil, err
	}
	if len(data) != int(blk.Size) || chunk.HashOf(data) != blk.Hash {
		return nil, errors.New("a chunk from the receiver does not match its block")
	}
	return data, nil
}
