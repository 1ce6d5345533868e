package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
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
	local, hasLocal, err := b.folderRing(ctx, folderID)
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
	var ring []crypt.FolderKey
	opened := false
	if env == nil {
		ring = local
		if !hasLocal {
			key, err := crypt.NewFolderKey()
			if err != nil {
				return err
			}
			ring = []crypt.FolderKey{key}
		}
		mine, err := b.presealWhile(ctx, f, ring, func() ([]byte, error) { return crypt.SealRing(ring, password) })
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
		if ring, err = crypt.OpenRing(env, password); err != nil {
			if errors.Is(err, crypt.ErrWrongPassword) {
				return fmt.Errorf("folder %s on receiver %s: %w (the folder already has a key there)", folderID, dev.Short(), err)
			}
			return fmt.Errorf("opening the folder's envelope from receiver %s: %w", dev.Short(), err)
		}
	}
	if hasLocal {
		switch {
		case isPrefix(local, ring):
			// The same ring, or a longer one: the key was rotated on
			// another device, and this one takes the new keys.
		case isPrefix(ring, local):
			// The receiver missed a rotation made here: it gets this
			// device's ring, under the password it was given.
			up, err := crypt.SealRing(local, password)
			if err != nil {
				return err
			}
			if env, err = replaceEnvelope(ctx, p, folderID, env, up); err != nil {
				return err
			}
			ring = local
		default:
			return fmt.Errorf("folder %s on receiver %s: %w", folderID, dev.Short(), ErrKeyMismatch)
		}
	}
	if newPassword != nil {
		re, err := crypt.RewrapEnvelope(env, password, newPassword)
		if err != nil {
			return err
		}
		if _, err := replaceEnvelope(ctx, p, folderID, env, re); err != nil {
			return err
		}
	}
	if !hasLocal || len(ring) > len(local) {
		if err := b.setFolderRing(ctx, folderID, ring); err != nil {
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

// RotateKey gives folderID a new key for everything sealed from now on,
// and changes its password to newPassword: every receiver's envelope then
// holds the folder's whole ring (old data stays readable), sealed under
// newPassword alone. Someone holding the old password and a copy of a
// store made after the change reads nothing sealed after it.
//
// Every receiver of the folder must be connected, so that none is left
// with an envelope the new data does not open with; each envelope must
// open with password, or, after a rotation cut short, with newPassword to
// the ring that rotation began (which is then finished, not begun again).
// Envelopes are replaced before this device seals with the new key. It
// returns the new key's generation.
func (b *Backup) RotateKey(ctx context.Context, folderID string, password, newPassword []byte) (int, error) {
	f := b.folders.Folder(folderID)
	if f == nil {
		return 0, fmt.Errorf("no running folder %q", folderID)
	}
	local, ok, err := b.folderRing(ctx, folderID)
	if err != nil {
		return 0, err
	}
	recvs := f.Receivers()
	if !ok || len(recvs) == 0 {
		return 0, fmt.Errorf("folder %s is not shared with an untrusted receiver: it has no key to rotate", folderID)
	}
	type held struct {
		p    *router.Peer
		env  []byte
		ring []crypt.FolderKey
		done bool // opens with newPassword: an earlier rotation got this far
	}
	var hs []held
	var next []crypt.FolderKey
	for _, dev := range recvs {
		p := b.net.WaitPeer(ctx, dev, shareWait)
		if p == nil || !p.Offers(folderID) {
			return 0, fmt.Errorf("%w: receiver %s must be connected and hold the folder: a rotation gives every receiver the new key", ErrNotConnected, dev.Short())
		}
		env, err := getEnvelope(ctx, p, folderID)
		if err != nil {
			return 0, err
		}
		if env == nil {
			return 0, fmt.Errorf("receiver %s holds no key of folder %s yet; try again once it does", dev.Short(), folderID)
		}
		h := held{p: p, env: env}
		h.ring, err = crypt.OpenRing(env, password)
		if errors.Is(err, crypt.ErrWrongPassword) {
			if r, err2 := crypt.OpenRing(env, newPassword); err2 == nil {
				h.ring, h.done, err = r, true, nil
			}
		}
		if err != nil {
			return 0, fmt.Errorf("folder %s on receiver %s: %w", folderID, dev.Short(), err)
		}
		switch {
		case !h.done && slices.Equal(h.ring, local):
		case h.done && len(h.ring) == len(local)+1 && isPrefix(local, h.ring):
			next = h.ring
		default:
			return 0, fmt.Errorf("folder %s on receiver %s: %w", folderID, dev.Short(), ErrKeyMismatch)
		}
		hs = append(hs, h)
	}
	if next == nil {
		if len(local) >= crypt.MaxGenerations {
			return 0, fmt.Errorf("folder %s's key was rotated %d times, the most a ring holds", folderID, len(local)-1)
		}
		key, err := crypt.NewFolderKey()
		if err != nil {
			return 0, err
		}
		next = append(slices.Clone(local), key)
	}
	env, err := crypt.SealRing(next, newPassword)
	if err != nil {
		return 0, err
	}
	for _, h := range hs {
		if h.done && slices.Equal(h.ring, next) {
			continue
		}
		if _, err := replaceEnvelope(ctx, h.p, folderID, h.env, env); err != nil {
			return 0, err
		}
	}
	if err := b.setFolderRing(ctx, folderID, next); err != nil {
		return 0, err
	}
	b.share(folderID).presealed.drop() // sealed with the old key
	f.Log().Info("rotated the folder key", "generation", len(next), "receivers", len(hs))
	return len(next), nil
}

// isPrefix reports whether ring a is b or begins it.
func isPrefix(a, b []crypt.FolderKey) bool {
	return len(a) <= len(b) && slices.Equal(a, b[:len(a)])
}

// replaceEnvelope puts env on p in place of old, and fails if another
// device changed it meanwhile.
func replaceEnvelope(ctx context.Context, p *router.Peer, folderID string, old, env []byte) ([]byte, error) {
	prev := sha256.Sum256(old)
	got, err := putEnvelope(ctx, p, folderID, env, prev[:])
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(got, env) {
		return nil, fmt.Errorf("the envelope on receiver %s changed meanwhile; try again", p.ID.Short())
	}
	return got, nil
}

// offerEncrypted shares a folder with a receiver that does not hold it
// yet: the envelope is sealed now and kept until the receiver accepts the
// folder, when it is stored there (see settleEnvelope).
func (b *Backup) offerEncrypted(ctx context.Context, f Folder, dev crypt.DeviceID, ring []crypt.FolderKey, hasKey bool, password []byte) error {
	if !hasKey {
		key, err := crypt.NewFolderKey()
		if err != nil {
			return err
		}
		ring = []crypt.FolderKey{key}
	}
	env, err := crypt.SealRing(ring, password)
	if err != nil {
		return err
	}
	if err := b.db.SetPendingEnvelope(ctx, f.ID(), dev.String(), env); err != nil {
		return err
	}
	if !hasKey {
		if err := b.setFolderRing(ctx, f.ID(), ring); err != nil {
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
