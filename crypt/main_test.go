package crypt

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/zeebo/blake3"
	"golang.org/x/crypto/chacha20poly1305"

	"lockstep/test/testutil"
)

// Scrypt work factors for tests: production envelopes use scryptLogN, which
// costs about a second; tests seal with 2^10 and open with at most 2^12.
const (
	testLogN    = 10
	testMaxLogN = 12
)

func TestMain(m *testing.M) { testutil.Main(m) }

// fixedFolderKey is 0x00, 0x01, ... 0x1f.
func fixedFolderKey() FolderKey {
	var k FolderKey
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

// testKeys returns the keys of fixedFolderKey.
func testKeys(t testing.TB) *Keys {
	t.Helper()
	k, err := DeriveKeys(fixedFolderKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// randomBytes returns n random bytes.
func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// compressible returns n bytes of repetitive text.
func compressible(n int) []byte {
	line := []byte("lockstep keeps folders identical across a person's devices.\n")
	return bytes.Repeat(line, n/len(line)+1)[:n]
}

// makeInner returns the inner record flags || uvarint || payload || padding.
func makeInner(flags byte, payload []byte) []byte {
	b := make([]byte, innerLen(len(payload)))
	putInner(b, flags, payload)
	return b
}

// sealRawChunk seals an arbitrary inner record as chunk id would be sealed,
// to build bodies SealChunk never makes.
func sealRawChunk(k *Keys, id ChunkID, inner []byte) []byte {
	g := k.current()
	nonce := g.chunkNonceFor(id)
	return g.chunkAEAD.Seal([]byte{g.gen}, nonce[:], inner, id[:])
}

// sealRawRecord seals an arbitrary inner record under h.
func sealRawRecord(k *Keys, h RecordHeader, nonce [chacha20poly1305.NonceSizeX]byte, inner []byte) []byte {
	g := k.current()
	out := append([]byte{g.gen}, nonce[:]...)
	return g.recordAEAD.Seal(out, nonce[:], inner, h.appendAAD(nil, g.gen))
}

// sealed seals plain with its true hash.
func sealed(t testing.TB, k *Keys, plain []byte, compress bool) (ChunkID, []byte) {
	t.Helper()
	id, body, err := k.SealChunk(plain, blake3.Sum256(plain), compress)
	if err != nil {
		t.Fatal(err)
	}
	return id, body
}
