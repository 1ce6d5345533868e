package crypt

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

func testHeader(k *Keys) RecordHeader {
	return RecordHeader{
		Folder:  "docs",
		File:    k.FileKey("notes/todo.txt"),
		Origin:  DeviceIDFromSPKI([]byte("origin")),
		Counter: 42,
	}
}

func TestRecordRoundTrip(t *testing.T) {
	k := testKeys(t)
	h := testHeader(k)
	for _, n := range []int{0, 1, 2, 5, 6, 7, 127, 128, 1000, 1 << 20} {
		payload := randomBytes(t, n)
		sealedRec, err := k.SealRecord(h, payload)
		if err != nil {
			t.Fatal(err)
		}
		if len(sealedRec) != recordOverhead+innerLen(n) {
			t.Fatalf("%d bytes sealed to %d, want %d", n, len(sealedRec), recordOverhead+innerLen(n))
		}
		got, err := k.OpenRecord(h, sealedRec)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("%d bytes: OpenRecord: %v", n, err)
		}
	}
}

func TestRecordSizeLimit(t *testing.T) {
	k := testKeys(t)
	h := testHeader(k)
	payload := make([]byte, MaxRecordSize+1)
	if _, err := k.SealRecord(h, payload); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("max+1: err = %v, want ErrTooLarge", err)
	}
	s, err := k.SealRecord(h, payload[:MaxRecordSize])
	if err != nil {
		t.Fatalf("max: %v", err)
	}
	if got, err := k.OpenRecord(h, s); err != nil || len(got) != MaxRecordSize {
		t.Fatalf("max: OpenRecord: %d bytes, %v", len(got), err)
	}
	// One byte beyond the largest legal sealed length is refused early.
	big := make([]byte, recordOverhead+innerLen(MaxRecordSize)+1)
	big[0] = 1
	if _, err := k.OpenRecord(h, big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: err = %v, want ErrTooLarge", err)
	}
}

func TestRecordRandomNonce(t *testing.T) {
	k := testKeys(t)
	h := testHeader(k)
	a, err := k.SealRecord(h, []byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.SealRecord(h, []byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Fatal("two seals of one record are identical")
	}
}

// TestRecordHeaderBinding: a record opens only under its own header.
func TestRecordHeaderBinding(t *testing.T) {
	k := testKeys(t)
	h := testHeader(k)
	s, err := k.SealRecord(h, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*RecordHeader){
		"folder":        func(h *RecordHeader) { h.Folder = "docs2" },
		"empty folder":  func(h *RecordHeader) { h.Folder = "" },
		"file":          func(h *RecordHeader) { h.File = k.FileKey("notes/todo.txt ") },
		"origin":        func(h *RecordHeader) { h.Origin[31] ^= 1 },
		"counter+1":     func(h *RecordHeader) { h.Counter++ },
		"counter-1":     func(h *RecordHeader) { h.Counter-- },
		"counter top":   func(h *RecordHeader) { h.Counter |= 1 << 63 },
		"zero origin":   func(h *RecordHeader) { h.Origin = DeviceID{} },
		"folder suffix": func(h *RecordHeader) { h.Folder = "docs\x00" },
	} {
		other := h
		mut(&other)
		if _, err := k.OpenRecord(other, s); !errors.Is(err, ErrAuth) {
			t.Errorf("%s: err = %v, want ErrAuth", name, err)
		}
	}
	// Length-prefixed folder: "ab"+file cannot pose as "a"+other bytes.
	a := RecordHeader{Folder: "a"}
	b := RecordHeader{Folder: "ab"}
	if bytes.Equal(a.appendAAD(nil, 1), b.appendAAD(nil, 1)[:len(a.appendAAD(nil, 1))]) {
		t.Fatal("AAD of one header is a prefix of another's")
	}
	other, err := DeriveKeys(FolderKey{7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.OpenRecord(h, s); !errors.Is(err, ErrAuth) {
		t.Fatalf("other key: err = %v, want ErrAuth", err)
	}
}

func TestOpenRecordBitFlips(t *testing.T) {
	k := testKeys(t)
	h := testHeader(k)
	s, err := k.SealRecord(h, []byte("a small record payload"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range len(s) * 8 {
		b := bytes.Clone(s)
		b[i/8] ^= 1 << (i % 8)
		want := ErrAuth
		if i < 8 {
			want = ErrFormat
		}
		if _, err := k.OpenRecord(h, b); !errors.Is(err, want) {
			t.Fatalf("bit %d: err = %v, want %v", i, err, want)
		}
	}
	for n := range len(s) {
		want := ErrAuth
		if n == 0 {
			want = ErrFormat
		}
		if _, err := k.OpenRecord(h, s[:n]); !errors.Is(err, want) {
			t.Fatalf("truncated to %d: err = %v, want %v", n, err, want)
		}
	}
	if _, err := k.OpenRecord(h, append(bytes.Clone(s), 0)); !errors.Is(err, ErrAuth) {
		t.Fatalf("extended: err = %v, want ErrAuth", err)
	}
}

func TestOpenRecordMalformedInner(t *testing.T) {
	k := testKeys(t)
	h := testHeader(k)
	var nonce [chacha20poly1305.NonceSizeX]byte
	pad := makeInner(0, []byte("abcdefghi"))
	pad[len(pad)-1] = 7
	for name, inner := range map[string][]byte{
		"zstd flag":       makeInner(flagZstd, []byte("x")),
		"unknown flag":    makeInner(0x40, []byte("x")),
		"nonzero padding": pad,
		"bad length":      {0, 9, 'x'},
	} {
		if _, err := k.OpenRecord(h, sealRawRecord(k, h, nonce, inner)); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err = %v, want ErrFormat", name, err)
		}
	}
	// The raw sealer itself is sound: a well-formed inner opens.
	if got, err := k.OpenRecord(h, sealRawRecord(k, h, nonce, makeInner(0, []byte("ok")))); err != nil || string(got) != "ok" {
		t.Fatalf("well formed: %q, %v", got, err)
	}
}

func TestFileKey(t *testing.T) {
	k := testKeys(t)
	nfc := "caf\u00e9/r\u00e9sum\u00e9.txt"
	nfd := "cafe\u0301/re\u0301sume\u0301.txt"
	if k.FileKey(nfc) != k.FileKey(nfd) {
		t.Fatal("NFC and NFD spellings have different file keys")
	}
	if k.FileKey("a/b") == k.FileKey("a/B") || k.FileKey("a") == k.FileKey("") {
		t.Fatal("different paths share a file key")
	}
	other, err := DeriveKeys(FolderKey{3})
	if err != nil {
		t.Fatal(err)
	}
	if other.FileKey("a/b") == k.FileKey("a/b") {
		t.Fatal("file key does not depend on the folder key")
	}
	fk := k.FileKey("a/b")
	got, err := ParseFileKey(fk.String())
	if err != nil || got != fk {
		t.Fatalf("ParseFileKey = %v, %v", got, err)
	}
	if _, err := ParseFileKey(fk.String()[1:]); !errors.Is(err, ErrFormat) {
		t.Fatalf("short file key: err = %v", err)
	}
	var u FileKey
	if err := u.UnmarshalText([]byte(fk.String())); err != nil || u != fk {
		t.Fatalf("UnmarshalText = %v, %v", u, err)
	}
}

// The HMACs behind FileKey are reused: each must start from the key alone,
// whichever goroutine used it before.
func TestFileKeyConcurrent(t *testing.T) {
	k := testKeys(t)
	names := []string{"a", "a/b", "photos/2024/IMG_0042.jpg", strings.Repeat("long/", 40), ""}
	want := make([]FileKey, len(names))
	for i, n := range names {
		m := hmac.New(sha256.New, k.name[:])
		m.Write([]byte(n))
		m.Sum(want[i][:0])
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				j := (g + i) % len(names)
				if got := k.FileKey(names[j]); got != want[j] {
					t.Errorf("FileKey(%q) = %s, want %s", names[j], got, want[j])
					return
				}
			}
		})
	}
	wg.Wait()
}
