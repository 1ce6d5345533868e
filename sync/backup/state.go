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

// folderRing returns the folder's key ring stored on this device, oldest
// first, if it has one.
func (b *Backup) folderRing(ctx context.Context, folderID string) ([]crypt.FolderKey, bool, error) {
	r, err := b.db.FolderKeyRing(ctx, folderID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	ring := make([]crypt.FolderKey, len(r))
	for i, k := range r {
		ring[i] = crypt.FolderKey(k)
	}
	return ring, true, nil
}

// setFolderRing stores the folder's key ring and drops the keys derived
// from the one before, so the next record or chunk sealed uses the new.
func (b *Backup) setFolderRing(ctx context.Context, folderID string, ring []crypt.FolderKey) error {
	r := make([][db.FolderKeySize]byte, len(ring))
	for i, k := range ring {
		r[i] = k
	}
	if err := b.db.SetFolderKeyRing(ctx, folderID, r); err != nil {
		return err
	}
	s := b.share(folderID)
	s.keysMu.Lock()
	s.keysCache = nil
	s.keysMu.Unlock()
	// Records held back for want of a key are read again: the callers
	// reload, which announces the cursors, and the receivers send from
	// there.
	s.mu.Lock()
	for d := range s.lacking {
		delete(s.recvErrs, d)
	}
	s.lacking = nil
	s.mu.Unlock()
	return nil
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
	ring, ok, err := b.folderRing(ctx, folderID)
	if err != nil {
		b.log.Error("reading folder key", "folder", folderID, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	keys, err := crypt.DeriveRing(ring)
	if err != nil {
		b.log.Error("deriving folder keys", "folder", folderID, "err", err)
		return nil
	}
	s.keysCache = keys
	return keys
}
