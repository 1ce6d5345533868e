package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

// Errors of ShareEncrypted.
var (
	// ErrNotConnected: the receiver must be reachable to share with it.
	ErrNotConnected = errors.New("receiver is not connected")
	// ErrKeyMismatch: the receiver holds an envelope of another key than
	// the one this device already uses for the folder.
	ErrKeyMismatch = errors.New("receiver holds another key for this folder")
)

// shareWait is how long ShareEncrypted waits for the receiver's
// connection (it may have been added a moment ago).
const shareWait = 5 * time.Second

// ShareEncrypted shares a folder with an untrusted receiver. The folder key
// lives on the receiver in an envelope sealed with password: the first
// device to share creates the key and stores the envelope there; a later
// device opens the envelope with the same password and uses that key (a
// wrong password is crypt.ErrWrongPassword, never a second key). With
// newPassword, the envelope is rewrapped under it afterwards. The receiver
// is normally connected and holds the folder, so the password is checked
// at once; if not, the envelope is sealed now and stored on the receiver
// when it accepts the folder (a receiver that by then holds another key
// is reported in the folder's status).
func (e *Engine) ShareEncrypted(ctx context.Context, folderID string, dev crypt.DeviceID, password, newPassword []byte) error {
	f := e.folder(folderID)
	if f == nil {
		return fmt.Errorf("no running folder %q", folderID)
	}
	local, hasLocal, err := e.folderKey(ctx, folderID)
	if err != nil {
		return err
	}
	pc := e.waitConn(ctx, dev)
	if pc == nil || !pc.offers(folderID) {
		if newPassword != nil {
			return fmt.Errorf("%w: receiver %s must be connected and hold the folder to change its password", ErrNotConnected, dev.Short())
		}
		return e.offerEncrypted(ctx, f, dev, local, hasLocal, password)
	}
	env, err := getEnvelope(ctx, pc, folderID)
	if err != nil {
		return err
	}
	var key crypt.FolderKey
	opened := false
	if env == nil {
		key = local
		if !hasLocal {
			if key, err = crypt.NewFolderKey(); err != nil {
				return err
			}
		}
		mine, err := f.presealWhile(ctx, key, func() ([]byte, error) { return crypt.SealEnvelope(key, password) })
		if err != nil {
			f.presealed.drop()
			return err
		}
		if env, err = putEnvelope(ctx, pc, folderID, mine, nil); err != nil {
			f.presealed.drop()
			return err
		}
		// Ours went in, so its key is known; else another device won the
		// race and its envelope is opened below.
		opened = bytes.Equal(env, mine)
		if !opened {
			f.presealed.drop() // sealed under our key, not the folder's
		}
	}
	if !opened {
		if key, err = crypt.OpenEnvelope(env, password); err != nil {
			if errors.Is(err, crypt.ErrWrongPassword) {
				return fmt.Errorf("folder %s on receiver %s: %w (the folder already has a key there)", folderID, dev.Short(), err)
			}
			return fmt.Errorf("opening the folder's envelope from receiver %s: %w", dev.Short(), err)
		}
	}
	if hasLocal && key != local {
		return fmt.Errorf("folder %s on receiver %s: %w", folderID, dev.Short(), ErrKeyMismatch)
	}
	if newPassword != nil {
		re, err := crypt.RewrapEnvelope(env, password, newPassword)
		if err != nil {
			return err
		}
		prev := sha256.Sum256(env)
		got, err := putEnvelope(ctx, pc, folderID, re, prev[:])
		if err != nil {
			return err
		}
		if !bytes.Equal(got, re) {
			return fmt.Errorf("the envelope on receiver %s changed meanwhile; try again", dev.Short())
		}
	}
	if !hasLocal {
		if err := e.db.SetSetting(ctx, folderKeySetting(folderID), hex.EncodeToString(key[:])); err != nil {
			return err
		}
	}
	if err := e.db.ShareFolder(ctx, folderID, dev.String()); err != nil {
		return err
	}
	if err := e.db.RemovePendingFolder(ctx, dev.String(), folderID); err != nil && !errors.Is(err, db.ErrNotFound) {
		return err
	}
	if err := f.refreshShares(ctx); err != nil {
		return err
	}
	return e.Reload(ctx)
}

// offerEncrypted shares a folder with a receiver that does not hold it
// yet: the envelope is sealed now and kept until the receiver accepts the
// folder, when it is stored there (see settleEnvelope).
func (e *Engine) offerEncrypted(ctx context.Context, f *folder, dev crypt.DeviceID, key crypt.FolderKey, hasKey bool, password []byte) error {
	if !hasKey {
		var err error
		if key, err = crypt.NewFolderKey(); err != nil {
			return err
		}
	}
	env, err := crypt.SealEnvelope(key, password)
	if err != nil {
		return err
	}
	if err := e.db.SetSetting(ctx, pendingEnvelopeSetting(f.id, dev), hex.EncodeToString(env)); err != nil {
		return err
	}
	if !hasKey {
		if err := e.db.SetSetting(ctx, folderKeySetting(f.id), hex.EncodeToString(key[:])); err != nil {
			return err
		}
	}
	if err := e.db.ShareFolder(ctx, f.id, dev.String()); err != nil {
		return err
	}
	if err := f.refreshShares(ctx); err != nil {
		return err
	}
	return e.Reload(ctx)
}

func pendingEnvelopeSetting(folderID string, dev crypt.DeviceID) string {
	return "pending-envelope/" + folderID + "/" + dev.String()
}

// settleEnvelope stores an envelope sealed by offerEncrypted on the
// receiver, which now holds the folder. It reports whether the folder may
// be sent: no envelope was pending, or the receiver took ours.
func (pc *peerConn) settleEnvelope(ctx context.Context, f *folder) bool {
	e := pc.e
	key := pendingEnvelopeSetting(f.id, pc.id)
	s, err := e.db.Setting(ctx, key)
	if errors.Is(err, db.ErrNotFound) {
		return true
	}
	env, derr := hex.DecodeString(s)
	if err != nil || derr != nil {
		f.setReceiverError(pc.id, fmt.Errorf("reading the pending envelope: %w", errors.Join(err, derr)))
		return false
	}
	got, err := getEnvelope(ctx, pc, f.id)
	if err == nil && got == nil {
		got, err = putEnvelope(ctx, pc, f.id, env, nil)
	}
	if err != nil {
		f.setReceiverError(pc.id, err)
		return false
	}
	if !bytes.Equal(got, env) {
		f.setReceiverError(pc.id, fmt.Errorf("%w: receiver %s already has a key for folder %s; share the folder with it again using that password", ErrKeyMismatch, pc.id.Short(), f.id))
		return false
	}
	if err := e.db.DeleteSetting(ctx, key); err != nil {
		f.log.Warn("forgetting the stored envelope", "err", err)
	}
	return true
}

// offers reports whether the peer's latest cluster config lists folderID.
func (pc *peerConn) offers(folderID string) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, wf := range pc.lastCC.GetFolders() {
		if wf.GetId() == folderID {
			return true
		}
	}
	return false
}

// folderKey returns the folder key stored on this device, if any.
func (e *Engine) folderKey(ctx context.Context, folderID string) (crypt.FolderKey, bool, error) {
	var k crypt.FolderKey
	s, err := e.db.Setting(ctx, folderKeySetting(folderID))
	if errors.Is(err, db.ErrNotFound) {
		return k, false, nil
	}
	if err != nil {
		return k, false, err
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(k) {
		return k, false, fmt.Errorf("the stored key of folder %s is damaged", folderID)
	}
	copy(k[:], b)
	return k, true, nil
}

// waitConn waits up to shareWait for a connection to dev and its cluster
// config, or returns nil.
func (e *Engine) waitConn(ctx context.Context, dev crypt.DeviceID) *peerConn {
	deadline := time.Now().Add(shareWait)
	for {
		if pc := e.conn(dev); pc != nil {
			pc.mu.Lock()
			cc := pc.lastCC
			pc.mu.Unlock()
			if cc != nil {
				return pc
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func getEnvelope(ctx context.Context, pc *peerConn, folderID string) ([]byte, error) {
	env, err := pc.conn.Request(ctx, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_GET, Folder: folderID, Size: protocol.MaxEnvelopeSize})
	if errors.Is(err, protocol.ErrNoSuchFile) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the folder's envelope from receiver %s (has it accepted the folder?): %w", pc.id.Short(), err)
	}
	return env, nil
}

func putEnvelope(ctx context.Context, pc *peerConn, folderID string, env, previous []byte) ([]byte, error) {
	got, err := pc.conn.Request(ctx, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_PUT, Folder: folderID, Size: protocol.MaxEnvelopeSize, Envelope: env, Previous: previous})
	if err != nil {
		return nil, fmt.Errorf("storing the folder's envelope on receiver %s (has it accepted the folder?): %w", pc.id.Short(), err)
	}
	return got, nil
}
