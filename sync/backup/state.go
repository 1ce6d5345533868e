package backup

import (
	"context"
	"errors"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// What this device keeps of its encrypted shares lives in the database's
// typed tables: the folder key, and per receiver its log's ID and this
// device's view of that log (storage/db's ReceiverView and origins).

// view is this device's view of receiver dev's log of folderID; the zero
// view when there is none or it can't be read.
func (b *Backup) view(ctx context.Context, folderID string, dev crypt.DeviceID) db.ReceiverView {
	v, err := b.db.ReceiverView(ctx, folderID, dev.String())
	if err != nil {
		b.log.Warn("reading a receiver's log position", "folder", folderID, "device", dev.String(), "err", err)
	}
	return v
}

// logID is the ID of receiver dev's log of folderID, 0 if none is known.
// It is kept as the peer's index ID, as trusted sync keeps its peers'.
func (b *Backup) logID(ctx context.Context, folderID string, dev crypt.DeviceID) uint64 {
	id, err := b.db.PeerIndexID(ctx, folderID, dev.String())
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		b.log.Warn("reading a receiver's log ID", "folder", folderID, "device", dev.String(), "err", err)
	}
	return id
}

// folderKey returns the folder key stored on this device, if any.
func (b *Backup) folderKey(ctx context.Context, folderID string) (crypt.FolderKey, bool, error) {
	k, err := b.db.FolderKey(ctx, folderID)
	if errors.Is(err, db.ErrNotFound) {
		return crypt.FolderKey{}, false, nil
	}
	if err != nil {
		return crypt.FolderKey{}, false, err
	}
	return crypt.FolderKey(k), true, nil
}

// keys returns the folder's derived keys, or nil if the folder has no key
// (it was never shared with a receiver).
func (b *Backup) keys(ctx context.Context, folderID string) *crypt.Keys {
	s := b.share(folderID)
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	if s.keysCache != nil {
		return s.keysCache
	}
	k, ok, err := b.folderKey(ctx, folderID)
	if err != nil {
		b.log.Error("reading folder key", "folder", folderID, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	keys, err := crypt.DeriveKeys(k)
	if err != nil {
		b.log.Error("deriving folder keys", "folder", folderID, "err", err)
		return nil
	}
	s.keysCache = keys
	return keys
}
