package crypt

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestStoreKey(t *testing.T) {
	k, err := NewStoreKey()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewStoreKey()
	seg := k.Segment("photos")
	if !strings.HasPrefix(seg, OpaqueSegmentPrefix) || len(seg) != 33 || strings.Contains(seg, "70686f746f73") {
		t.Fatalf("segment %q: want o and 32 hex digits, nothing of the ID", seg)
	}
	if k.Segment("photos") != seg || k.Segment("photos2") == seg || other.Segment("photos") == seg {
		t.Fatal("segments must be stable per key and ID, and differ across IDs and keys")
	}
	back, err := ParseStoreKey(k.String())
	if err != nil || back != k {
		t.Fatalf("ParseStoreKey(String()) = %v, %v", back, err)
	}
	if _, err := ParseStoreKey("xyz"); !errors.Is(err, ErrFormat) {
		t.Fatalf("ParseStoreKey of junk: %v", err)
	}

	plain := []byte(`{"id":"photos","label":"Holidays"}`)
	sealed, err := k.SealMeta(seg, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !IsSealedMeta(sealed) || IsSealedMeta(plain) || bytes.Contains(sealed, []byte("photos")) || bytes.Contains(sealed, []byte("Holidays")) {
		t.Fatal("a sealed meta object shows its content or is not recognised")
	}
	got, err := k.OpenMeta(seg, sealed)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("OpenMeta = %q, %v", got, err)
	}
	if _, err := other.OpenMeta(seg, sealed); !errors.Is(err, ErrAuth) {
		t.Fatalf("another key: %v, want ErrAuth", err)
	}
	if _, err := k.OpenMeta(k.Segment("docs"), sealed); !errors.Is(err, ErrAuth) {
		t.Fatalf("another segment: %v, want ErrAuth", err)
	}
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-1] ^= 1
	if _, err := k.OpenMeta(seg, flipped); !errors.Is(err, ErrAuth) {
		t.Fatalf("changed bytes: %v, want ErrAuth", err)
	}
	if _, err := k.OpenMeta(seg, plain); !errors.Is(err, ErrFormat) {
		t.Fatalf("a plain meta: %v, want ErrFormat", err)
	}
	if _, err := k.OpenMeta(seg, storeMetaMagic); !errors.Is(err, ErrFormat) {
		t.Fatalf("a truncated sealed meta: %v, want ErrFormat", err)
	}
}
