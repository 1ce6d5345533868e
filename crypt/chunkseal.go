package crypt

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"
	"golang.org/x/crypto/chacha20poly1305"
)

// The first byte of a sealed chunk body is the generation of the key that
// sealed it (see Keys): 0x01 for a folder's first key.

// chunkOverhead is the size of a sealed chunk body beyond its inner record.
const chunkOverhead = 1 + chacha20poly1305.Overhead

// ChunkID names a sealed chunk on receivers: keyed BLAKE3 of the plaintext's
// BLAKE3-256 hash under the folder's chunk-ID key. Without the key it says
// nothing about the plaintext; equal plaintexts in one folder share an ID.
type ChunkID [32]byte

// String returns the ID as 64 lower-case hex digits.
func (c ChunkID) String() string { return hex.EncodeToString(c[:]) }

// ParseChunkID parses the form String returns, exactly: 64 lower-case hex
// digits, so one chunk has one name. Errors wrap ErrFormat.
func ParseChunkID(s string) (ChunkID, error) {
	var c ChunkID
	if err := parseHex(c[:], s); err != nil {
		return ChunkID{}, fmt.Errorf("chunk ID: %w", err)
	}
	return c, nil
}

// MarshalText returns the hex form.
func (c ChunkID) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText parses the hex form; on error c is unchanged.
func (c *ChunkID) UnmarshalText(b []byte) error {
	v, err := ParseChunkID(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// ChunkID returns the ID of the chunk whose plaintext hashes (BLAKE3-256) to
// plainHash.
func (k *Keys) ChunkID(plainHash [32]byte) ChunkID {
	return ChunkID(k.idHashers.sum(plainHash[:]))
}

// SealChunk encrypts one chunk and returns its ID and body:
//
//	body  = 0x01 || XChaCha20-Poly1305(chunk key, nonce, inner, aad = ID)
//	nonce = keyed-BLAKE3(chunk nonce key, ID)[:24], ID = ChunkID(plainHash)
//	inner = flags || uvarint(len(payload)) || payload || zeros to Padmé length
//
// where payload is zstd(plain) and flags bit 0 is set if compress is true,
// the chunk passes worthCompressing and zstd(plain) is smaller, else
// payload is plain and flags is 0. The result is
// deterministic: the same key, plaintext and compress give the same bytes,
// so devices upload identical chunks (for a given zstd version; the ID never
// depends on compression).
//
// The caller guarantees plainHash == BLAKE3-256(plain); SealChunk does not
// recompute it. A wrong hash gives a body that OpenChunk rejects with
// ErrChunkID, and two different plaintexts sealed under one wrong hash would
// share a nonce. plain longer than MaxChunkSize is ErrTooLarge.
func (k *Keys) SealChunk(plain []byte, plainHash [32]byte, compress bool) (ChunkID, []byte, error) {
	return k.SealChunkTo(nil, plain, plainHash, compress)
}

// SealedChunkLen is the length of the body SealChunk makes of an
// uncompressed plaintext of n bytes: an upper bound for any n-byte chunk.
func SealedChunkLen(n int) int { return chunkOverhead + innerLen(n) }

// SealChunkTo is SealChunk writing the body into dst's backing array when
// it has room (cap(dst) >= SealedChunkLen(len(plain)) always suffices),
// so a caller can reuse buffers; else into a new one.
func (k *Keys) SealChunkTo(dst []byte, plain []byte, plainHash [32]byte, compress bool) (ChunkID, []byte, error) {
	if len(plain) > MaxChunkSize {
		return ChunkID{}, nil, fmt.Errorf("sealing chunk: %w: %d bytes (limit %d)", ErrTooLarge, len(plain), MaxChunkSize)
	}
	id := k.ChunkID(plainHash)
	payload, flags := plain, byte(0)
	if compress && len(plain) > 0 && k.worthCompressing(plain) {
		// Room for an incompressible chunk too (raw blocks: a 3-byte header
		// per 128 KiB plus the frame header), so EncodeAll never regrows.
		room := len(plain) + 3*(len(plain)>>17+1) + 32
		if z := k.enc.EncodeAll(plain, make([]byte, 0, room)); len(z) < len(plain) {
			payload, flags = z, flagZstd
		}
	}
	n := innerLen(len(payload))
	var body []byte
	if cap(dst) >= 1+n+chacha20poly1305.Overhead {
		body = dst[:1+n]
	} else {
		body = make([]byte, 1+n, 1+n+chacha20poly1305.Overhead)
	}
	g := k.current()
	body[0] = g.gen
	putInner(body[1:], flags, payload)
	nonce := g.chunkNonceFor(id)
	body = g.chunkAEAD.Seal(body[:1], nonce[:], body[1:], id[:])
	return id, body, nil
}

// OpenChunk decrypts and verifies a chunk body sealed by SealChunk and
// returns its plaintext. It checks, in order: the format byte (ErrFormat),
// the size (ErrTooLarge), the AEAD under the chunk key bound to id
// (ErrAuth), the inner framing and zero padding (ErrFormat), decompression,
// never beyond MaxChunkSize (ErrFormat, ErrTooLarge), and that the plaintext
// hashes to id (ErrChunkID). body is not modified or retained.
func (k *Keys) OpenChunk(id ChunkID, body []byte) ([]byte, error) {
	return k.OpenChunkTo(nil, id, body)
}

// OpenChunkTo is OpenChunk decrypting into dst's backing array when it has
// room (cap(dst) >= len(body) always suffices), so a caller can reuse
// buffers. The plaintext returned may be a slice of dst (uncompressed
// chunks) or of new memory (compressed ones); dst must not be reused while
// the plaintext is.
func (k *Keys) OpenChunkTo(dst []byte, id ChunkID, body []byte) ([]byte, error) {
	plain, err := k.openChunk(dst, id, body)
	if err != nil {
		return nil, err
	}
	if k.ChunkID(blake3.Sum256(plain)) != id {
		return nil, fmt.Errorf("opening chunk %v: %w", id, ErrChunkID)
	}
	return plain, nil
}

// OpenBlockTo is OpenChunkTo for the chunk of a block whose plaintext hash
// is known: the chunk is the one named ChunkID(plainHash), and its
// plaintext must hash to plainHash (ErrChunkID), so the caller need not
// hash it again.
func (k *Keys) OpenBlockTo(dst []byte, plainHash [32]byte, body []byte) ([]byte, error) {
	id := k.ChunkID(plainHash)
	plain, err := k.openChunk(dst, id, body)
	if err != nil {
		return nil, err
	}
	if blake3.Sum256(plain) != plainHash {
		return nil, fmt.Errorf("opening chunk %v: %w", id, ErrChunkID)
	}
	return plain, nil
}

// openChunk is OpenChunkTo up to, not including, the check of the
// plaintext's hash.
func (k *Keys) openChunk(dst []byte, id ChunkID, body []byte) ([]byte, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("opening chunk %v: %w: empty", id, ErrFormat)
	}
	g, err := k.generation(body[0])
	if err != nil {
		return nil, fmt.Errorf("opening chunk %v: %w", id, err)
	}
	if len(body) < chunkOverhead+2 {
		return nil, fmt.Errorf("opening chunk %v: %w: %d bytes is too short", id, ErrAuth, len(body))
	}
	if len(body) > chunkOverhead+innerLen(MaxChunkSize) {
		return nil, fmt.Errorf("opening chunk %v: %w: %d bytes", id, ErrTooLarge, len(body))
	}
	nonce := g.chunkNonceFor(id)
	inner, err := g.chunkAEAD.Open(dst[:0], nonce[:], body[1:], id[:])
	if err != nil {
		return nil, fmt.Errorf("opening chunk %v: %w", id, ErrAuth)
	}
	flags, payload, err := parseInner(inner, MaxChunkSize)
	if err != nil {
		return nil, fmt.Errorf("opening chunk %v: %w", id, err)
	}
	plain := payload
	if flags&flagZstd != 0 {
		plain, err = k.dec.DecodeAll(payload, nil)
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded):
			return nil, fmt.Errorf("opening chunk %v: %w: decompresses beyond %d bytes", id, ErrTooLarge, MaxChunkSize)
		case err != nil:
			return nil, fmt.Errorf("opening chunk %v: %w: decompressing: %w", id, ErrFormat, err)
		case len(plain) > MaxChunkSize:
			return nil, fmt.Errorf("opening chunk %v: %w: decompresses beyond %d bytes", id, ErrTooLarge, MaxChunkSize)
		}
	}
	return plain, nil
}

// compressProbe is how much of a large chunk is compressed first to see
// whether compressing the whole is worth it.
const compressProbe = 64 << 10

// worthCompressing reports whether plain should be compressed: a chunk
// larger than twice the probe is compressed only if its first
// compressProbe bytes shrink by at least 1/32. Already-compressed data
// (photos, video, archives) then costs one small probe, not a full zstd
// pass. The decision depends on the plaintext alone, so sealing stays
// deterministic.
func (k *Keys) worthCompressing(plain []byte) bool {
	if len(plain) <= 2*compressProbe {
		return true
	}
	bp := probeBufs.Get().(*[]byte)
	defer probeBufs.Put(bp)
	z := k.enc.EncodeAll(plain[:compressProbe], (*bp)[:0])
	return len(z) < compressProbe-compressProbe/32
}

// probeBufs holds worthCompressing's output buffers (with room for an
// incompressible probe), so a probe allocates nothing.
var probeBufs = sync.Pool{New: func() any { b := make([]byte, 0, compressProbe+1024); return &b }}

// chunkNonceFor returns the nonce of the chunk with the given ID. The ID is
// a keyed hash of the plaintext hash, so the nonce is a function of the
// plaintext hash that the opener, who knows only the ID, can compute:
// distinct plaintexts get distinct nonces, equal plaintexts equal bodies.
func (g *sealKeys) chunkNonceFor(id ChunkID) [chacha20poly1305.NonceSizeX]byte {
	var n [chacha20poly1305.NonceSizeX]byte
	sum := g.nonceHashers.sum(id[:])
	copy(n[:], sum[:])
	return n
}

// keyedHashers hands out keyed BLAKE3 hashers of one key. A new hasher
// allocates several KiB, which for a 32-byte message costs far more than
// the hash: a chunk ID and a nonce per chunk made them most of a
// receiver upload's garbage.
type keyedHashers struct {
	key  [32]byte
	pool sync.Pool
}

func newKeyedHashers(key [32]byte) *keyedHashers {
	kh := &keyedHashers{key: key}
	kh.pool.New = func() any {
		h, err := blake3.NewKeyed(kh.key[:])
		if err != nil {
			panic("crypt: blake3 rejected a 32-byte key: " + err.Error())
		}
		return h
	}
	return kh
}

// sum returns the 32-byte keyed BLAKE3 hash of msg.
func (kh *keyedHashers) sum(msg []byte) [32]byte {
	h := kh.pool.Get().(*blake3.Hasher)
	h.Reset()
	h.Write(msg)
	var out [32]byte
	h.Sum(out[:0])
	kh.pool.Put(h)
	return out
}

// parseHex decodes exactly 2*len(dst) lower-case hex digits into dst.
// Errors wrap ErrFormat.
func parseHex(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("%w: %d characters, want %d hex digits", ErrFormat, len(s), 2*len(dst))
	}
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'F' {
			return fmt.Errorf("%w: upper-case hex digit", ErrFormat)
		}
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return nil
}
