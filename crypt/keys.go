package crypt

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/restic/chunker"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/hkdf"
)

// FolderKey is a folder's 32-byte secret, from which every subkey derives.
// It lives only on trusted devices and, wrapped, in the folder's envelope.
type FolderKey [32]byte

// NewFolderKey returns a new random folder key.
func NewFolderKey() (FolderKey, error) {
	var k FolderKey
	if _, err := rand.Read(k[:]); err != nil {
		return FolderKey{}, fmt.Errorf("new folder key: %w", err)
	}
	return k, nil
}

// Size limits. OpenChunk never inflates a chunk beyond MaxChunkSize.
const (
	// MaxChunkSize is the largest chunk plaintext SealChunk and OpenChunk
	// accept: twice the chunker's maximum, so a future chunker may grow.
	MaxChunkSize = 8 << 20
	// MaxRecordSize is the largest record payload SealRecord and OpenRecord
	// accept (a record lists its chunks: 64 MiB is about a million).
	MaxRecordSize = 64 << 20
)

// MaxSealedChunkSize is the largest body SealChunk returns and OpenChunk
// accepts: a sealed MaxChunkSize plaintext, padded.
var MaxSealedChunkSize = chunkOverhead + innerLen(MaxChunkSize)

// HKDF labels (info = kdfPrefix + label). Changing one is a format change.
const (
	kdfPrefix       = "lockstep/v1/"
	labelChunkID    = "chunk-id"
	labelChunk      = "chunk"
	labelName       = "name"
	labelRecord     = "record"
	labelPolynomial = "polynomial"
	labelChunkNonce = "chunk-nonce" // derived from the chunk key, not the folder key
	labelCheckpoint = "checkpoint"
	subkeySize      = 32
)

// Keys are a folder's subkeys, each HKDF-SHA256(folderKey, salt=nil,
// info="lockstep/v1/<label>") for the labels chunk-id, chunk, name,
// record and checkpoint, and the folder's chunker polynomial: restic/chunker's
// DerivePolynomial reading the HKDF stream with label "polynomial". The
// chunk nonce key is HKDF-SHA256(chunk key, salt=nil,
// info="lockstep/v1/chunk-nonce").
//
// A Keys is safe for concurrent use. It holds one zstd encoder and decoder,
// used only through their stateless EncodeAll/DecodeAll, so it starts no
// goroutines and needs no Close.
type Keys struct {
	chunkID    [subkeySize]byte
	chunk      [subkeySize]byte
	chunkNonce [subkeySize]byte
	name       [subkeySize]byte
	record     [subkeySize]byte
	checkpoint [subkeySize]byte
	pol        chunker.Pol

	idHashers, nonceHashers *keyedHashers
	// nameMACs holds HMACs keyed with name: a new one allocates and
	// hashes the key's two pads, several times the work of a file key.
	nameMACs, markMACs sync.Pool

	chunkAEAD  cipher.AEAD
	recordAEAD cipher.AEAD
	enc        *zstd.Encoder
	dec        *zstd.Decoder
}

// DeriveKeys derives a folder's subkeys from its key. It fails only if the
// system is broken, or, with probability below 2^-50, if 1020 candidate
// polynomials from the HKDF stream are all reducible.
func DeriveKeys(k FolderKey) (*Keys, error) {
	ks := &Keys{}
	for _, sk := range []struct {
		secret []byte
		label  string
		out    *[subkeySize]byte
	}{
		{k[:], labelChunkID, &ks.chunkID},
		{k[:], labelChunk, &ks.chunk},
		{k[:], labelName, &ks.name},
		{k[:], labelRecord, &ks.record},
		{k[:], labelCheckpoint, &ks.checkpoint},
		{ks.chunk[:], labelChunkNonce, &ks.chunkNonce}, // after chunk
	} {
		r := hkdf.New(sha256.New, sk.secret, nil, []byte(kdfPrefix+sk.label))
		if _, err := io.ReadFull(r, sk.out[:]); err != nil {
			return nil, fmt.Errorf("deriving %s key: %w", sk.label, err)
		}
	}
	pol, err := chunker.DerivePolynomial(hkdf.New(sha256.New, k[:], nil, []byte(kdfPrefix+labelPolynomial)))
	if err != nil {
		return nil, fmt.Errorf("deriving polynomial: %w", err)
	}
	ks.pol = pol
	ks.idHashers, ks.nonceHashers = newKeyedHashers(ks.chunkID), newKeyedHashers(ks.chunkNonce)
	ks.nameMACs.New = func() any { return hmac.New(sha256.New, ks.name[:]) }
	ks.markMACs.New = func() any { return hmac.New(sha256.New, ks.checkpoint[:]) }

	if ks.chunkAEAD, err = chacha20poly1305.NewX(ks.chunk[:]); err != nil {
		return nil, fmt.Errorf("chunk cipher: %w", err)
	}
	if ks.recordAEAD, err = chacha20poly1305.NewX(ks.record[:]); err != nil {
		return nil, fmt.Errorf("record cipher: %w", err)
	}
	// The options are part of the deterministic output of SealChunk: the
	// same zstd version and options give the same bytes on every device.
	ks.enc, err = zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false), // the AEAD authenticates the payload
	)
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	ks.dec, err = zstd.NewReader(nil,
		zstd.WithDecoderMaxMemory(MaxChunkSize),
		zstd.WithDecoderMaxWindow(MaxChunkSize),
	)
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return ks, nil
}

// Polynomial returns the folder's secret chunker polynomial: irreducible, of
// degree 53.
func (k *Keys) Polynomial() chunker.Pol { return k.pol }
