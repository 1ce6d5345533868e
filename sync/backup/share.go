package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/sync/router"
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
func (b *Backup) ShareEncrypted(ctx context.Context, folderID string, dev crypt.DeviceID, password, newPassword []byte) error {
	f := b.folders.Folder(folderID)
	if f == nil {
		return fmt.Errorf("no running folder %q", folderID)
	}
	ps := &b.share(folderID).presealed
	local, hasLocal, err := b.folderKey(ctx, folderID)
	if err != nil {
		return err
	}
	p := b.net.WaitPeer(ctx, dev, shareWait)
	if p == nil || !p.Offers(folderID) {
		if newPassword != nil {
			return fmt.Errorf("%w: receiver %s must be connected and hold the folder to change its password", ErrNotConnected, dev.Short())
		}
		return b.offerEncrypted(ctx, f, dev, local, hasLocal, password)
	}
	env, err := getEnvelope(ctx, p, folderID)
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
		mine, err := b.presealWhile(ctx, f, key, func() ([]byte, error) { return crypt.SealEnvelope(key, password) })
		if err != nil {
			ps.drop()
			return err
		}
		if env, err = putEnvelope(ctx, p, folderID, mine, nil); err != nil {
			ps.drop()
			return err
		}
		// Ours went in, so its key is known; else another device won the
		// race and its envelope is opened below.
		opened = bytes.Equal(env, mine)
		if !opened {
			ps.drop() // sealed under our key, not the folder's
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
		got, err := putEnvelope(ctx, p, folderID, re, prev[:])
		if err != nil {
			return err
		}
		if !bytes.Equal(got, re) {
			return fmt.Errorf("the envelope on receiver %s changed meanwhile; try again", dev.Short())
		}
	}
	if !hasLocal {
		if err := b.db.SetFolderKey(ctx, folderID, key); err != nil {
			return err
		}
	}
	if err := b.db.ShareFolder(ctx, folderID, dev.String()); err != nil {
		return err
	}
	if err := b.db.RemovePendingFolder(ctx, dev.String(), folderID); err != nil && !errors.Is(err, db.ErrNotFound) {
		return err
	}
	return b.folders.Reload(ctx)
}

// offerEncrypted shares a folder with a receiver that does not hold it
// yet: the envelope is sealed now and kept until the receiver accepts the
// folder, when it is stored there (see settleEnvelope).
func (b *Backup) offerEncrypted(ctx context.Context, f Folder, dev crypt.DeviceID, key crypt.FolderKey, hasKey bool, password []byte) error {
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
	if err := b.db.SetPendingEnvelope(ctx, f.ID(), dev.String(), env); err != nil {
		return err
	}
	if !hasKey {
		if err := b.db.SetFolderKey(ctx, f.ID(), key); err != nil {
			return err
		}
	}
	if err := b.db.ShareFolder(ctx, f.ID(), dev.String()); err != nil {
		return err
	}
	return b.folders.Reload(ctx)
}

// settleEnvelope stores an envelope sealed by offerEncrypted on the
// receiver, which now holds the folder. It reports whether the folder may
// be sent: no envelope was pending, or the receiver took ours.
func (b *Backup) settleEnvelope(ctx context.Context, p *router.Peer, f Folder) bool {
	sh := b.share(f.ID())
	env, err := b.db.PendingEnvelope(ctx, f.ID(), p.ID.String())
	if errors.Is(err, db.ErrNotFound) {
		return true
	}
	if err != nil {
		sh.setReceiverError(p.ID, fmt.Errorf("reading the pending envelope: %w", err))
		return false
	}
	got, err := getEnvelope(ctx, p, f.ID())
	if err == nil && got == nil {
		got, err = putEnvelope(ctx, p, f.ID(), env, nil)
	}
	if err != nil {
		sh.setReceiverError(p.ID, err)
		return false
	}
	if !bytes.Equal(got, env) {
		sh.setReceiverError(p.ID, fmt.Errorf("%w: receiver %s already has a key for folder %s; share the folder with it again using that password", ErrKeyMismatch, p.ID.Short(), f.ID()))
		return false
	}
	if err := b.db.DeletePendingEnvelope(ctx, f.ID(), p.ID.String()); err != nil {
		f.Log().Warn("forgetting the stored envelope", "err", err)
	}
	return true
}

func getEnvelope(ctx context.Context, p *router.Peer, folderID string) ([]byte, error) {
	env, err := p.Conn.Request(ctx, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_GET, Folder: folderID, Size: protocol.MaxEnvelopeSize})
	if errors.Is(err, protocol.ErrNoSuchFile) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the folder's envelope from receiver %s (has it accepted the folder?): %w", p.ID.Short(), err)
	}
	return env, nil
}

func putEnvelope(ctx context.Context, p *router.Peer, folderID string, env, previous []byte) ([]byte, error) {
	got, err := p.Conn.Request(ctx, &protocol.Request{Kind: protocol.RequestKind_REQUEST_KIND_ENVELOPE_PUT, Folder: folderID, Size: protocol.MaxEnvelopeSize, Envelope: env, Previous: previous})
	if err != nil {
		return nil, fmt.Errorf("storing the folder's envelope on receiver %s (has it accepted the folder?): %w", p.ID.Short(), err)
	}
	return got, nil
}
