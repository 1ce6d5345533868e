package crypt

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/text/unicode/norm"
)

// The first byte of a sealed record is the generation of the key that
// sealed it (see Keys): 0x01 for a folder's first key.

// recordOverhead is the size of a sealed record beyond its inner record.
const recordOverhead = 1 + chacha20poly1305.NonceSizeX + chacha20poly1305.Overhead

// FileKey names a file on receivers without revealing its name:
// HMAC-SHA256(name key, NFC form of the folder-relative path). All versions
// of one file share it.
type FileKey [32]byte

// FileKey returns the file key of a folder-relative path. The path is
// normalised to NFC first, so composed and decomposed spellings agree.
func (k *Keys) FileKey(path string) FileKey {
	m := k.nameMACs.Get().(hash.Hash)
	m.Reset()
	m.Write([]byte(norm.NFC.String(path)))
	var fk FileKey
	m.Sum(fk[:0])
	k.nameMACs.Put(m)
	return fk
}

// String returns the key as 64 lower-case hex digits.
func (f FileKey) String() string { return hex.EncodeToString(f[:]) }

// ParseFileKey parses the form String returns, exactly. Errors wrap
// ErrFormat.
func ParseFileKey(s string) (FileKey, error) {
	var f FileKey
	if err := parseHex(f[:], s); err != nil {
		return FileKey{}, fmt.Errorf("file key: %w", err)
	}
	return f, nil
}

// MarshalText returns the hex form.
func (f FileKey) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText parses the hex form; on error f is unchanged.
func (f *FileKey) UnmarshalText(b []byte) error {
	v, err := ParseFileKey(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// RecordGeneration returns the key generation a sealed record names (its
// format byte), 0 for an empty one.
func RecordGeneration(sealed []byte) byte {
	if len(sealed) == 0 {
		return 0
	}
	return sealed[0]
}

// RecordHeader is the readable part of a sealed record, bound to it as
// associated data: a record opens only under the header it was sealed with.
type RecordHeader struct {
	Folder  string   // folder ID
	File    FileKey  // which file the record is a version of
	Origin  DeviceID // device that wrote the version
	Counter uint64   // origin's record counter: strictly increasing per origin
}

// appendAAD appends the canonical encoding of h for a record of key
// generation gen:
//
//	gen || uvarint(len(Folder)) || Folder || File || Origin || Counter (8 bytes, big endian)
func (h *RecordHeader) appendAAD(dst []byte, gen byte) []byte {
	dst = append(dst, gen)
	dst = binary.AppendUvarint(dst, uint64(len(h.Folder)))
	dst = append(dst, h.Folder...)
	dst = append(dst, h.File[:]...)
	dst = append(dst, h.Origin[:]...)
	return binary.BigEndian.AppendUint64(dst, h.Counter)
}

// SealRecord encrypts a record payload bound to h:
//
//	sealed = gen || nonce (24 random bytes) || XChaCha20-Poly1305(record key, nonce, inner, aad = h)
//
// where gen is the key generation that seals (Keys.Generation).
//
//	inner  = 0x00 || uvarint(len(payload)) || payload || zeros to Padmé length
//
// Padding hides exact payload sizes (which would leak name lengths and chunk
// counts). A payload longer than MaxRecordSize is ErrTooLarge.
func (k *Keys) SealRecord(h RecordHeader, payload []byte) ([]byte, error) {
	var nonce [chacha20poly1305.NonceSizeX]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("sealing record: %w", err)
	}
	return k.sealRecordWithNonce(h, payload, nonce)
}

// sealRecordWithNonce is SealRecord with a given nonce, for test vectors.
func (k *Keys) sealRecordWithNonce(h RecordHeader, payload []byte, nonce [chacha20poly1305.NonceSizeX]byte) ([]byte, error) {
	if len(payload) > MaxRecordSize {
		return nil, fmt.Errorf("sealing record: %w: %d bytes (limit %d)", ErrTooLarge, len(payload), MaxRecordSize)
	}
	n := innerLen(len(payload))
	pre := 1 + len(nonce)
	out := make([]byte, pre+n, pre+n+chacha20poly1305.Overhead)
	g := k.current()
	out[0] = g.gen
	copy(out[1:], nonce[:])
	putInner(out[pre:], 0, payload)
	return g.recordAEAD.Seal(out[:pre], nonce[:], out[pre:], h.appendAAD(nil, g.gen)), nil
}

// OpenRecord decrypts and verifies a record sealed by SealRecord under the
// same header. Errors: ErrFormat (format byte 0, malformed inner framing
// or padding), ErrNewerKey (a generation the ring lacks), ErrTooLarge
// (beyond MaxRecordSize), ErrAuth (tampered, other key, other header).
// sealed is not modified or retained.
func (k *Keys) OpenRecord(h RecordHeader, sealed []byte) ([]byte, error) {
	if len(sealed) == 0 {
		return nil, fmt.Errorf("opening record: %w: empty", ErrFormat)
	}
	g, err := k.generation(sealed[0])
	if err != nil {
		return nil, fmt.Errorf("opening record: %w", err)
	}
	if len(sealed) < recordOverhead+2 {
		return nil, fmt.Errorf("opening record: %w: %d bytes is too short", ErrAuth, len(sealed))
	}
	if len(sealed) > recordOverhead+innerLen(MaxRecordSize) {
		return nil, fmt.Errorf("opening record: %w: %d bytes", ErrTooLarge, len(sealed))
	}
	pre := 1 + chacha20poly1305.NonceSizeX
	inner, err := g.recordAEAD.Open(nil, sealed[1:pre], sealed[pre:], h.appendAAD(nil, g.gen))
	if err != nil {
		return nil, fmt.Errorf("opening record: %w", ErrAuth)
	}
	flags, payload, err := parseInner(inner, MaxRecordSize)
	if err != nil {
		return nil, fmt.Errorf("opening record: %w", err)
	}
	if flags != 0 {
		return nil, fmt.Errorf("opening record: %w: flags %#04x", ErrFormat, flags)
	}
	return payload, nil
}
