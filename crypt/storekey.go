package crypt

import (
	"bytes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// A receiver's store key hides, from whoever can read its store (an S3
// provider, a copy of the bucket), which folders the store holds: each
// folder is stored under Segment(folder ID), which says nothing of the ID
// without the key, and its meta object (folder ID, label, devices,
// retention) is sealed with it. The receiver keeps the key in its home;
// rebuilding its folders from the store alone needs it.

// StoreKey is a receiver's store key.
type StoreKey [32]byte

// Store key labels (info = kdfPrefix + label). Changing one is a format
// change.
const (
	labelStoreSegment = "store segment"
	labelStoreMeta    = "store meta"
)

// storeMetaMagic starts a sealed meta object; a plain one is JSON and
// starts with '{'.
var storeMetaMagic = []byte("lockstep sealed meta 1\n")

// OpaqueSegmentPrefix starts every segment a store key makes: folder
// segments of the readable kind are hex and never start with it.
const OpaqueSegmentPrefix = "o"

// NewStoreKey returns a random store key.
func NewStoreKey() (StoreKey, error) {
	var k StoreKey
	if _, err := rand.Read(k[:]); err != nil {
		return StoreKey{}, fmt.Errorf("making a store key: %w", err)
	}
	return k, nil
}

// String returns the key as 64 lower-case hex digits.
func (k StoreKey) String() string { return hex.EncodeToString(k[:]) }

// ParseStoreKey parses the form String returns. Errors wrap ErrFormat.
func ParseStoreKey(s string) (StoreKey, error) {
	var k StoreKey
	if err := parseHex(k[:], s); err != nil {
		return StoreKey{}, fmt.Errorf("store key: %w", err)
	}
	return k, nil
}

// subkey derives the subkey of label.
func (k StoreKey) subkey(label string) ([subkeySize]byte, error) {
	var out [subkeySize]byte
	err := hkdfRead(k[:], label, &out)
	return out, err
}

// Segment returns the store segment of folderID: OpaqueSegmentPrefix and
// 32 hex digits of a keyed hash of the ID.
func (k StoreKey) Segment(folderID string) string {
	sk, err := k.subkey(labelStoreSegment)
	if err != nil {
		panic(err) // HKDF-SHA256 of 32 bytes cannot fail
	}
	m := hmac.New(sha256.New, sk[:])
	m.Write([]byte(folderID))
	return OpaqueSegmentPrefix + hex.EncodeToString(m.Sum(nil)[:16])
}

// SealMeta seals a folder's meta object for the store, bound to its
// segment, so that it opens only where it was written.
func (k StoreKey) SealMeta(segment string, plain []byte) ([]byte, error) {
	aead, err := k.metaAEAD()
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(storeMetaMagic)+chacha20poly1305.NonceSizeX, len(storeMetaMagic)+chacha20poly1305.NonceSizeX+len(plain)+aead.Overhead())
	copy(out, storeMetaMagic)
	nonce := out[len(storeMetaMagic):]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("sealing meta: %w", err)
	}
	return aead.Seal(out, nonce, plain, []byte(segment)), nil
}

// OpenMeta opens what SealMeta sealed for segment. A wrong key, another
// segment or changed bytes are ErrAuth; a body that is not a sealed meta
// object is ErrFormat.
func (k StoreKey) OpenMeta(segment string, sealed []byte) ([]byte, error) {
	if !IsSealedMeta(sealed) || len(sealed) < len(storeMetaMagic)+chacha20poly1305.NonceSizeX {
		return nil, fmt.Errorf("opening meta: %w: not a sealed meta object", ErrFormat)
	}
	aead, err := k.metaAEAD()
	if err != nil {
		return nil, err
	}
	rest := sealed[len(storeMetaMagic):]
	plain, err := aead.Open(nil, rest[:chacha20poly1305.NonceSizeX], rest[chacha20poly1305.NonceSizeX:], []byte(segment))
	if err != nil {
		return nil, fmt.Errorf("opening meta of %s: %w", segment, ErrAuth)
	}
	return plain, nil
}

// IsSealedMeta reports whether data is a sealed meta object.
func IsSealedMeta(data []byte) bool { return bytes.HasPrefix(data, storeMetaMagic) }

func (k StoreKey) metaAEAD() (cipher.AEAD, error) {
	sk, err := k.subkey(labelStoreMeta)
	if err != nil {
		return nil, err
	}
	return chacha20poly1305.NewX(sk[:])
}
