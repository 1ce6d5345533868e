package crypt

import (
	"crypto/hkdf"
	"crypto/sha256"
	"testing"

	"go.uber.org/goleak"
)

// TestDeriveKeysHKDF recomputes every subkey with the standard library's
// HKDF, an implementation independent of the one DeriveKeys uses.
func TestDeriveKeysHKDF(t *testing.T) {
	fk := fixedFolderKey()
	k := testKeys(t)
	g := k.current()
	for label, got := range map[string][32]byte{
		"chunk-id": k.chunkID, "chunk": g.chunk, "name": k.name, "record": g.record, "checkpoint": g.checkpoint,
	} {
		want, err := hkdf.Key(sha256.New, fk[:], nil, "lockstep/v1/"+label, 32)
		if err != nil {
			t.Fatal(err)
		}
		if string(got[:]) != string(want) {
			t.Errorf("%s key = %x, want %x", label, got, want)
		}
	}
	want, err := hkdf.Key(sha256.New, g.chunk[:], nil, "lockstep/v1/chunk-nonce", 32)
	if err != nil {
		t.Fatal(err)
	}
	if string(g.chunkNonce[:]) != string(want) {
		t.Errorf("chunk nonce key = %x, want %x", g.chunkNonce, want)
	}
}

func TestDeriveKeysDistinct(t *testing.T) {
	a := testKeys(t)
	b, err := DeriveKeys(fixedFolderKey())
	if err != nil {
		t.Fatal(err)
	}
	if a.current().chunk != b.current().chunk || a.pol != b.pol {
		t.Fatal("DeriveKeys is not deterministic")
	}
	seen := map[[32]byte]string{}
	for name, k := range map[string][32]byte{
		"chunk-id": a.chunkID, "chunk": a.current().chunk, "chunk-nonce": a.current().chunkNonce, "name": a.name, "record": a.current().record, "checkpoint": a.current().checkpoint,
	} {
		if other, dup := seen[k]; dup {
			t.Fatalf("%s and %s keys are equal", name, other)
		}
		seen[k] = name
	}
	other := fixedFolderKey()
	other[31] ^= 1
	c, err := DeriveKeys(other)
	if err != nil {
		t.Fatal(err)
	}
	if c.chunkID == a.chunkID || c.current().chunk == a.current().chunk || c.name == a.name || c.current().record == a.current().record || c.pol == a.pol {
		t.Fatal("a one-bit change of the folder key left a subkey unchanged")
	}
}

func TestPolynomial(t *testing.T) {
	for range 20 {
		fk, err := NewFolderKey()
		if err != nil {
			t.Fatal(err)
		}
		k, err := DeriveKeys(fk)
		if err != nil {
			t.Fatal(err)
		}
		p := k.Polynomial()
		if p.Deg() != 53 || !p.Irreducible() {
			t.Fatalf("polynomial %v: degree %d, irreducible %v", p, p.Deg(), p.Irreducible())
		}
	}
}

func TestNewFolderKey(t *testing.T) {
	a, err := NewFolderKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewFolderKey()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a == (FolderKey{}) {
		t.Fatal("folder keys are not random")
	}
}

// TestKeysStartNoGoroutines: sealing and opening, compressed, leave no
// goroutine behind (a Keys has no Close).
func TestKeysStartNoGoroutines(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	k := testKeys(t)
	for _, n := range []int{1 << 10, 400 << 10, 4 << 20} {
		id, body := sealed(t, k, compressible(n), true)
		if _, err := k.OpenChunk(id, body); err != nil {
			t.Fatal(err)
		}
	}
	goleak.VerifyNone(t, ignore)
}
