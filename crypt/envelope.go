package crypt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"
)

// Envelope container layout (see the package comment):
//
//	envelope = magic || part+
//	magic    = "lockstep-envelope/v1\n"
//	part     = kind (1 byte) || uint16 big-endian length || age file
//
// The first part is the password part (kind 'p'): an age file encrypted to
// one scrypt recipient. At most one recovery part (kind 'r') may follow: an
// age file encrypted to every X25519 recovery recipient. Each age file's
// payload is the folder's key ring: 1 to MaxGenerations 32-byte keys,
// oldest first (a folder never rotated has one). Nothing else may follow.
const (
	envelopeMagic   = "lockstep-envelope/v1\n"
	partPassword    = 'p'
	partRecovery    = 'r'
	maxPartSize     = 1<<16 - 1
	folderKeySize   = len(FolderKey{})
	scryptLogN      = 18 // work factor of new envelopes: 256 MiB, about 1 s
	scryptMaxLogN   = 20 // largest accepted when opening: 1 GiB
	envelopePartHdr = 3
)

// envelope is a parsed envelope container.
type envelope struct {
	password []byte // age file, scrypt recipient
	recovery []byte // age file, X25519 recipients; nil if none
}

// parseEnvelope parses the container strictly. Errors wrap ErrEnvelope.
func parseEnvelope(b []byte) (envelope, error) {
	var e envelope
	if !bytes.HasPrefix(b, []byte(envelopeMagic)) {
		return e, fmt.Errorf("%w: not a lockstep envelope (v1)", ErrEnvelope)
	}
	b = b[len(envelopeMagic):]
	for i := 0; len(b) > 0; i++ {
		if len(b) < envelopePartHdr {
			return envelope{}, fmt.Errorf("%w: truncated part header", ErrEnvelope)
		}
		kind, n := b[0], int(binary.BigEndian.Uint16(b[1:3]))
		b = b[envelopePartHdr:]
		if n == 0 || n > len(b) {
			return envelope{}, fmt.Errorf("%w: part of %d bytes", ErrEnvelope, n)
		}
		part := b[:n:n]
		b = b[n:]
		switch {
		case i == 0 && kind == partPassword:
			e.password = part
		case i == 1 && kind == partRecovery:
			e.recovery = part
		default:
			return envelope{}, fmt.Errorf("%w: unexpected part %q at position %d", ErrEnvelope, kind, i)
		}
	}
	if e.password == nil {
		return envelope{}, fmt.Errorf("%w: no password part", ErrEnvelope)
	}
	return e, nil
}

// marshal encodes e; each part must be 1..maxPartSize bytes.
func (e envelope) marshal() ([]byte, error) {
	out := []byte(envelopeMagic)
	for _, p := range []struct {
		kind byte
		data []byte
	}{{partPassword, e.password}, {partRecovery, e.recovery}} {
		if p.data == nil {
			continue
		}
		if len(p.data) == 0 || len(p.data) > maxPartSize {
			return nil, fmt.Errorf("%w: envelope part of %d bytes", ErrTooLarge, len(p.data))
		}
		out = append(out, p.kind)
		out = binary.BigEndian.AppendUint16(out, uint16(len(p.data)))
		out = append(out, p.data...)
	}
	return out, nil
}

// SealEnvelope wraps a folder key for storage on untrusted receivers: an age
// file to an scrypt recipient for password (work factor 2^18), plus, if
// recovery recipients are given, a second age file to all of them (age
// refuses to mix scrypt with other recipients in one file). The result is
// randomised. An empty password is ErrEmptyPassword.
func SealEnvelope(key FolderKey, password []byte, recovery ...*age.X25519Recipient) ([]byte, error) {
	return sealEnvelope(key, password, scryptLogN, recovery)
}

// SealRing is SealEnvelope for a folder's key ring (see DeriveRing).
func SealRing(ring []FolderKey, password []byte, recovery ...*age.X25519Recipient) ([]byte, error) {
	return sealRing(ring, password, scryptLogN, recovery)
}

func sealEnvelope(key FolderKey, password []byte, logN int, recovery []*age.X25519Recipient) ([]byte, error) {
	return sealRing([]FolderKey{key}, password, logN, recovery)
}

func sealRing(ring []FolderKey, password []byte, logN int, recovery []*age.X25519Recipient) ([]byte, error) {
	if len(ring) == 0 || len(ring) > MaxGenerations {
		return nil, fmt.Errorf("sealing envelope: a ring of %d keys", len(ring))
	}
	if len(password) == 0 {
		return nil, fmt.Errorf("sealing envelope: %w", ErrEmptyPassword)
	}
	pr, err := age.NewScryptRecipient(string(password))
	if err != nil {
		return nil, fmt.Errorf("sealing envelope: %w", err)
	}
	pr.SetWorkFactor(logN)
	var e envelope
	if e.password, err = withKDF(func() ([]byte, error) { return ageSeal(ring, pr) }); err != nil {
		return nil, fmt.Errorf("sealing envelope: %w", err)
	}
	if len(recovery) > 0 {
		rs := make([]age.Recipient, len(recovery))
		for i, r := range recovery {
			if r == nil {
				return nil, fmt.Errorf("sealing envelope: recovery recipient %d is nil", i)
			}
			rs[i] = r
		}
		if e.recovery, err = ageSeal(ring, rs...); err != nil {
			return nil, fmt.Errorf("sealing envelope: %w", err)
		}
	}
	out, err := e.marshal()
	if err != nil {
		return nil, fmt.Errorf("sealing envelope: %w", err)
	}
	return out, nil
}

// OpenEnvelope returns the folder key in env using password: the first
// of its ring (OpenRing returns them all). A wrong (or empty) password is
// ErrWrongPassword; a malformed or damaged envelope, or one whose scrypt
// work factor exceeds 2^20, is ErrEnvelope.
func OpenEnvelope(env, password []byte) (FolderKey, error) {
	return openEnvelope(env, password, scryptMaxLogN)
}

// OpenRing returns the folder's key ring in env using password, oldest
// first. Errors are OpenEnvelope's.
func OpenRing(env, password []byte) ([]FolderKey, error) {
	return openRing(env, password, scryptMaxLogN)
}

func openEnvelope(env, password []byte, maxLogN int) (FolderKey, error) {
	ring, err := openRing(env, password, maxLogN)
	if err != nil {
		return FolderKey{}, err
	}
	return ring[0], nil
}

func openRing(env, password []byte, maxLogN int) ([]FolderKey, error) {
	if len(password) == 0 {
		return nil, fmt.Errorf("opening envelope: %w: %w", ErrWrongPassword, ErrEmptyPassword)
	}
	e, err := parseEnvelope(env)
	if err != nil {
		return nil, fmt.Errorf("opening envelope: %w", err)
	}
	si, err := age.NewScryptIdentity(string(password))
	if err != nil {
		return nil, fmt.Errorf("opening envelope: %w", err)
	}
	si.SetMaxWorkFactor(maxLogN)
	ring, err := withKDF(func() ([]FolderKey, error) { return ageOpen(e.password, passwordIdentity{si}) })
	var noMatch *age.NoIdentityMatchError
	switch {
	case errors.As(err, &noMatch):
		return nil, fmt.Errorf("opening envelope: %w", ErrWrongPassword)
	case err != nil:
		return nil, fmt.Errorf("opening envelope: %w: %w", ErrEnvelope, err)
	}
	return ring, nil
}

// OpenEnvelopeWithIdentity returns the (first) folder key in env using an X25519
// recovery identity. An envelope without a recovery part for id, or a
// malformed or damaged one, is ErrEnvelope.
//
// Recovery gives confidentiality, not authenticity: anyone who knows a
// recovery recipient (public key) can make an envelope this opens. Keep
// recovery recipients private, or check the key against another copy.
func OpenEnvelopeWithIdentity(env []byte, id *age.X25519Identity) (FolderKey, error) {
	if id == nil {
		return FolderKey{}, fmt.Errorf("opening envelope: %w: no identity given", ErrEnvelope)
	}
	e, err := parseEnvelope(env)
	if err != nil {
		return FolderKey{}, fmt.Errorf("opening envelope: %w", err)
	}
	if e.recovery == nil {
		return FolderKey{}, fmt.Errorf("opening envelope: %w: it has no recovery recipients", ErrEnvelope)
	}
	ring, err := ageOpen(e.recovery, id)
	var noMatch *age.NoIdentityMatchError
	switch {
	case errors.As(err, &noMatch):
		return FolderKey{}, fmt.Errorf("opening envelope: %w: identity is not a recovery recipient", ErrEnvelope)
	case err != nil:
		return FolderKey{}, fmt.Errorf("opening envelope: %w: %w", ErrEnvelope, err)
	}
	return ring[0], nil
}

// RewrapEnvelope opens env with oldPassword and seals the same key ring
// for newPassword and the given recovery recipients. Recovery recipients of
// env are not carried over (an envelope does not reveal them): pass them
// again to keep them. Errors are those of OpenEnvelope and SealEnvelope.
func RewrapEnvelope(env, oldPassword, newPassword []byte, recovery ...*age.X25519Recipient) ([]byte, error) {
	return rewrapEnvelope(env, oldPassword, newPassword, scryptMaxLogN, scryptLogN, recovery)
}

func rewrapEnvelope(env, oldPassword, newPassword []byte, maxLogN, logN int, recovery []*age.X25519Recipient) ([]byte, error) {
	if len(newPassword) == 0 {
		return nil, fmt.Errorf("rewrapping envelope: %w", ErrEmptyPassword)
	}
	ring, err := openRing(env, oldPassword, maxLogN)
	if err != nil {
		return nil, fmt.Errorf("rewrapping envelope: %w", err)
	}
	return sealRing(ring, newPassword, logN, recovery)
}

// passwordIdentity accepts only age files with exactly one scrypt stanza, so
// that ScryptIdentity's "incorrect identity" means a wrong password and not
// a file of another kind.
type passwordIdentity struct{ *age.ScryptIdentity }

func (p passwordIdentity) Unwrap(stanzas []*age.Stanza) (fileKey []byte, err error) {
	if len(stanzas) != 1 || stanzas[0].Type != "scrypt" {
		return nil, errors.New("password part is not a single scrypt stanza")
	}
	return p.ScryptIdentity.Unwrap(stanzas)
}

// ageSeal returns an age file holding ring for the recipients.
func ageSeal(ring []FolderKey, recipients ...age.Recipient) ([]byte, error) {
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, recipients...)
	if err != nil {
		return nil, err
	}
	for _, key := range ring {
		if _, err := w.Write(key[:]); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ageOpen decrypts an age file that must hold a key ring.
func ageOpen(file []byte, id age.Identity) ([]FolderKey, error) {
	r, err := age.Decrypt(bytes.NewReader(file), id)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(folderKeySize)*MaxGenerations+1))
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || len(b)%folderKeySize != 0 || len(b) > folderKeySize*MaxGenerations {
		return nil, fmt.Errorf("payload of %d bytes, want 1 to %d keys of %d", len(b), MaxGenerations, folderKeySize)
	}
	ring := make([]FolderKey, len(b)/folderKeySize)
	for i := range ring {
		ring[i] = FolderKey(b[i*folderKeySize:])
	}
	return ring, nil
}
