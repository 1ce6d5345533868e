package crypt

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
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
// A folder whose key was rotated has a ring of keys, oldest first (see
// DeriveRing): names, chunk IDs and the polynomial come from the first, so
// files keep their file keys and chunks dedupe across a rotation; sealing
// (record, chunk, chunk nonce and checkpoint keys) uses the newest, its
// generation (1 for the first key) being the format byte of what it seals;
// opening picks the generation by that byte.
//
// A Keys is safe for concurrent use. It holds one zstd encoder and decoder,
// used only through their stateless EncodeAll/DecodeAll, so it starts no
// goroutines and needs no Close.
type Keys struct {
	chunkID [subkeySize]byte
	name    [subkeySize]byte
	pol     chunker.Pol

	idHashers *keyedHashers
	// nameMACs holds HMACs keyed with name: a new one allocates and
	// hashes the key's two pads, several times the work of a file key.
	nameMACs sync.Pool

	gens []*sealKeys // generation g at g-1; sealing uses the last

	enc *zstd.Encoder
	dec *zstd.Decoder
}

// sealKeys are the subkeys of one key generation that seal and open.
type sealKeys struct {
	gen        byte
	chunk      [subkeySize]byte
	chunkNonce [subkeySize]byte
	record     [subkeySize]byte
	checkpoint [subkeySize]byte

	nonceHashers *keyedHashers
	markMACs     sync.Pool
	chunkAEAD    cipher.AEAD
	recordAEAD   cipher.AEAD
}

// MaxGenerations is how many keys a folder's ring may hold: a generation
// is a format byte, and 0 is none.
const MaxGenerations = 255

// ErrNewerKey: a record or chunk was sealed with a key generation this
// ring does not have: the folder's key was rotated on another device.
// Fetch the new ring (share the folder again with the current password).
var ErrNewerKey = errors.New("sealed with a newer folder key than this device holds")

// DeriveKeys derives a folder's subkeys from its key: a ring of one.
func DeriveKeys(k FolderKey) (*Keys, error) { return DeriveRing([]FolderKey{k}) }

// DeriveRing derives the subkeys of a folder whose keys are ring, oldest
// first (1 to MaxGenerations keys). It fails only if the ring's size is out
// of range, the system is broken, or, with probability below 2^-50, if 1020
// candidate polynomials from the HKDF stream are all reducible.
func DeriveRing(ring []FolderKey) (*Keys, error) {
	if len(ring) == 0 || len(ring) > MaxGenerations {
		return nil, fmt.Errorf("deriving keys: a ring of %d keys", len(ring))
	}
	k := ring[0]
	ks := &Keys{}
	for _, sk := range []struct {
		label string
		out   *[subkeySize]byte
	}{{labelChunkID, &ks.chunkID}, {labelName, &ks.name}} {
		if err := hkdfRead(k[:], sk.label, sk.out); err != nil {
			return nil, err
		}
	}
	pol, err := chunker.DerivePolynomial(hkdf.New(sha256.New, k[:], nil, []byte(kdfPrefix+labelPolynomial)))
	if err != nil {
		return nil, fmt.Errorf("deriving polynomial: %w", err)
	}
	ks.pol = pol
	ks.idHashers = newKeyedHashers(ks.chunkID)
	ks.nameMACs.New = func() any { return hmac.New(sha256.New, ks.name[:]) }
	for i, key := range ring {
		g, err := deriveSealKeys(key, byte(i+1))
		if err != nil {
			return nil, err
		}
		ks.gens = append(ks.gens, g)
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

func deriveSealKeys(k FolderKey, gen byte) (*sealKeys, error) {
	g := &sealKeys{gen: gen}
	for _, sk := range []struct {
		secret []byte
		label  string
		out    *[subkeySize]byte
	}{
		{k[:], labelChunk, &g.chunk},
		{k[:], labelRecord, &g.record},
		{k[:], labelCheckpoint, &g.checkpoint},
		{g.chunk[:], labelChunkNonce, &g.chunkNonce}, // after chunk
	} {
		if err := hkdfRead(sk.secret, sk.label, sk.out); err != nil {
			return nil, err
		}
	}
	g.nonceHashers = newKeyedHashers(g.chunkNonce)
	g.markMACs.New = func() any { return hmac.New(sha256.New, g.checkpoint[:]) }
	var err error
	if g.chunkAEAD, err = chacha20poly1305.NewX(g.chunk[:]); err != nil {
		return nil, fmt.Errorf("chunk cipher: %w", err)
	}
	if g.recordAEAD, err = chacha20poly1305.NewX(g.record[:]); err != nil {
		return nil, fmt.Errorf("record cipher: %w", err)
	}
	return g, nil
}

func hkdfRead(secret []byte, label string, out *[subkeySize]byte) error {
	r := hkdf.New(sha256.New, secret, nil, []byte(kdfPrefix+label))
	if _, err := io.ReadFull(r, out[:]); err != nil {
		return fmt.Errorf("deriving %s key: %w", label, err)
	}
	return nil
}

// Generation is the generation new records and chunks are sealed with:
// the number of keys in the ring.
func (k *Keys) Generation() byte { return byte(len(k.gens)) }

// current returns the generation that seals.
func (k *Keys) current() *sealKeys { return k.gens[len(k.gens)-1] }

// generation returns the keys of generation g (a format byte).
func (k *Keys) generation(g byte) (*sealKeys, error) {
	if g == 0 {
		return nil, fmt.Errorf("%w: generation 0", ErrFormat)
	}
	if int(g) > len(k.gens) {
		// Also ErrFormat: to a ring without it, the byte names no format.
		return nil, fmt.Errorf("%w: %w (generation %d; this device has %d)", ErrFormat, ErrNewerKey, g, len(k.gens))
	}
	return k.gens[g-1], nil
}

// Polynomial returns the folder's secret chunker polynomial: irreducible, of
// degree 53.
func (k *Keys) Polynomial() chunker.Pol { return k.pol }
