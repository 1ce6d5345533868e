package crypt

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"
)

func TestChunkRoundTrip(t *testing.T) {
	k := testKeys(t)
	for _, n := range []int{0, 1, 2, 100, 128 << 10, 400 << 10, MaxChunkSize - 1, MaxChunkSize} {
		for _, kind := range []string{"random", "compressible"} {
			plain := compressible(n)
			if kind == "random" {
				plain = randomBytes(t, n)
			}
			for _, compress := range []bool{false, true} {
				id, body := sealed(t, k, plain, compress)
				if id != k.ChunkID(blake3.Sum256(plain)) {
					t.Fatalf("%d %s: ID does not match ChunkID", n, kind)
				}
				got, err := k.OpenChunk(id, body)
				if err != nil || !bytes.Equal(got, plain) {
					t.Fatalf("%d %s compress=%v: OpenChunk: %v", n, kind, compress, err)
				}
				if compress && kind == "compressible" {
					if n >= 1024 && len(body) >= n/2 {
						t.Fatalf("%d compressible bytes sealed to %d", n, len(body))
					}
				} else if len(body) != chunkOverhead+innerLen(n) {
					t.Fatalf("%d %s compress=%v: body %d bytes, want %d", n, kind, compress, len(body), chunkOverhead+innerLen(n))
				}
			}
		}
	}
}

func TestSealChunkTooLarge(t *testing.T) {
	k := testKeys(t)
	plain := make([]byte, MaxChunkSize+1)
	if _, _, err := k.SealChunk(plain, blake3.Sum256(plain), true); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestSealChunkDeterministic(t *testing.T) {
	k := testKeys(t)
	other, err := DeriveKeys(FolderKey{1})
	if err != nil {
		t.Fatal(err)
	}
	for _, compress := range []bool{false, true} {
		plain := compressible(50 << 10)
		id1, b1 := sealed(t, k, plain, compress)
		id2, b2 := sealed(t, k, bytes.Clone(plain), compress)
		if id1 != id2 || !bytes.Equal(b1, b2) {
			t.Fatal("sealing twice gave different bytes")
		}
		id3, b3 := sealed(t, other, plain, compress)
		if id3 == id1 || bytes.Equal(b3, b1) {
			t.Fatal("another folder key gave the same chunk")
		}
		plain[0] ^= 1
		id4, b4 := sealed(t, k, plain, compress)
		if id4 == id1 || bytes.Equal(b4[1:25], b1[1:25]) {
			t.Fatal("another plaintext gave the same ID or keystream")
		}
	}
}

// TestChunkCompressionChoice: compression is used only when asked and only
// when it helps; random data is sealed the same either way.
func TestChunkCompressionChoice(t *testing.T) {
	k := testKeys(t)
	random := randomBytes(t, 64<<10)
	_, b1 := sealed(t, k, random, false)
	_, b2 := sealed(t, k, random, true)
	if !bytes.Equal(b1, b2) {
		t.Fatal("incompressible chunk sealed differently with compress=true")
	}
	text := compressible(64 << 10)
	_, plainBody := sealed(t, k, text, false)
	_, zBody := sealed(t, k, text, true)
	if len(zBody) >= len(plainBody)/4 {
		t.Fatalf("compressed body %d bytes, uncompressed %d", len(zBody), len(plainBody))
	}
}

// TestChunkPaddingHidesLength: close plaintext lengths give equal body
// lengths.
func TestChunkPaddingHidesLength(t *testing.T) {
	k := testKeys(t)
	sizes := map[int]bool{}
	for n := 300 << 10; n < 300<<10+4096; n++ {
		sizes[chunkOverhead+innerLen(n)] = true
	}
	if len(sizes) > 2 {
		t.Fatalf("4096 consecutive lengths gave %d body lengths", len(sizes))
	}
	_, a := sealed(t, k, randomBytes(t, 300<<10), false)
	_, b := sealed(t, k, randomBytes(t, 300<<10+1000), false)
	if len(a) != len(b) {
		t.Fatalf("body lengths %d and %d differ", len(a), len(b))
	}
}

func TestOpenChunkWrongHash(t *testing.T) {
	k := testKeys(t)
	plain := []byte("the caller promised this hash")
	id, body, err := k.SealChunk(plain, blake3.Sum256([]byte("something else")), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.OpenChunk(id, body); !errors.Is(err, ErrChunkID) {
		t.Fatalf("err = %v, want ErrChunkID", err)
	}
}

// TestOpenBlock opens a chunk by its block's plaintext hash: its own body
// opens; a body sealed under a false hash, or another chunk's body, does
// not.
func TestOpenBlock(t *testing.T) {
	k := testKeys(t)
	for _, compress := range []bool{false, true} {
		plain := compressible(5000)
		hash := blake3.Sum256(plain)
		_, body, err := k.SealChunk(plain, hash, compress)
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.OpenBlockTo(make([]byte, 0, len(body)), hash, body)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("compress=%v: got %d bytes, %v", compress, len(got), err)
		}
		other := compressible(5001)
		_, otherBody, err := k.SealChunk(other, blake3.Sum256(other), compress)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.OpenBlockTo(nil, hash, otherBody); !errors.Is(err, ErrAuth) {
			t.Errorf("compress=%v: another chunk's body: err = %v, want ErrAuth", compress, err)
		}
	}
	plain := []byte("the caller promised this hash")
	promised := blake3.Sum256([]byte("something else"))
	_, body, err := k.SealChunk(plain, promised, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.OpenBlockTo(nil, promised, body); !errors.Is(err, ErrChunkID) {
		t.Fatalf("sealed under a false hash: err = %v, want ErrChunkID", err)
	}
}

// TestOpenChunkBitFlips flips every bit of small sealed chunks.
func TestOpenChunkBitFlips(t *testing.T) {
	k := testKeys(t)
	for _, compress := range []bool{false, true} {
		id, body := sealed(t, k, compressible(200), compress)
		for i := range len(body) * 8 {
			b := bytes.Clone(body)
			b[i/8] ^= 1 << (i % 8)
			want := ErrAuth
			if i < 8 {
				want = ErrFormat
			}
			if _, err := k.OpenChunk(id, b); !errors.Is(err, want) {
				t.Fatalf("compress=%v bit %d: err = %v, want %v", compress, i, err, want)
			}
		}
		for i := range len(id) * 8 {
			other := id
			other[i/8] ^= 1 << (i % 8)
			if _, err := k.OpenChunk(other, body); !errors.Is(err, ErrAuth) {
				t.Fatalf("ID bit %d: err = %v, want ErrAuth", i, err)
			}
		}
	}
}

func TestOpenChunkLengths(t *testing.T) {
	k := testKeys(t)
	id, body := sealed(t, k, []byte("short"), false)
	for n := range len(body) {
		want := ErrAuth
		if n == 0 {
			want = ErrFormat
		}
		if _, err := k.OpenChunk(id, body[:n]); !errors.Is(err, want) {
			t.Fatalf("truncated to %d: err = %v, want %v", n, err, want)
		}
	}
	if _, err := k.OpenChunk(id, append(bytes.Clone(body), 0)); !errors.Is(err, ErrAuth) {
		t.Fatalf("extended: err = %v, want ErrAuth", err)
	}
	other, err := DeriveKeys(FolderKey{9})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.OpenChunk(id, body); !errors.Is(err, ErrAuth) {
		t.Fatalf("other key: err = %v, want ErrAuth", err)
	}
	// The largest legal body length passes the size check (and fails
	// authentication); one more byte is ErrTooLarge.
	max := chunkOverhead + innerLen(MaxChunkSize)
	big := make([]byte, max+1)
	big[0] = 1
	if _, err := k.OpenChunk(id, big[:max]); !errors.Is(err, ErrAuth) {
		t.Fatalf("max length: err = %v, want ErrAuth", err)
	}
	if _, err := k.OpenChunk(id, big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("max+1 length: err = %v, want ErrTooLarge", err)
	}
}

// TestOpenChunkMalformedInner seals inner records SealChunk never makes,
// with a valid AEAD, and checks OpenChunk still refuses them.
func TestOpenChunkMalformedInner(t *testing.T) {
	k := testKeys(t)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	zeros := func(n int) []byte { return make([]byte, n) }
	withID := func(plain []byte) ChunkID { return k.ChunkID(blake3.Sum256(plain)) }
	nonzeroPad := makeInner(0, []byte("abcdefghi")) // 11 -> 12 bytes
	nonzeroPad[len(nonzeroPad)-1] = 1

	for name, c := range map[string]struct {
		id    ChunkID
		inner []byte
		want  error
	}{
		"unknown flag":    {withID([]byte("x")), makeInner(2, []byte("x")), ErrFormat},
		"nonzero padding": {withID([]byte("abcdefghi")), nonzeroPad, ErrFormat},
		"bad zstd":        {withID([]byte("x")), makeInner(flagZstd, []byte("not zstd at all")), ErrFormat},
		"zstd at max":     {withID(zeros(MaxChunkSize)), makeInner(flagZstd, enc.EncodeAll(zeros(MaxChunkSize), nil)), nil},
		"zstd bomb":       {withID(zeros(MaxChunkSize + 1)), makeInner(flagZstd, enc.EncodeAll(zeros(MaxChunkSize+1), nil)), ErrTooLarge},
		"zstd two frames": {withID(zeros(MaxChunkSize + 2)), makeInner(flagZstd, append(enc.EncodeAll(zeros(MaxChunkSize), nil), enc.EncodeAll(zeros(2), nil)...)), ErrTooLarge},
		"stream no size":  {withID(zeros(MaxChunkSize + 1)), makeInner(flagZstd, streamZstd(t, zeros(MaxChunkSize+1))), ErrTooLarge},
		"wrong plaintext": {withID([]byte("y")), makeInner(0, []byte("x")), ErrChunkID},
		"empty zstd":      {withID(nil), makeInner(flagZstd, nil), nil},
	} {
		_, err := k.OpenChunk(c.id, sealRawChunk(k, c.id, c.inner))
		if (c.want == nil && err != nil) || !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
}

// streamZstd compresses with the streaming encoder, whose frames do not
// state their content size.
func streamZstd(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestChunkConcurrent(t *testing.T) {
	k := testKeys(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				plain := compressible(1000 + 997*g + i)
				id, body, err := k.SealChunk(plain, blake3.Sum256(plain), i%2 == 0)
				if err == nil {
					var got []byte
					got, err = k.OpenChunk(id, body)
					if err == nil && !bytes.Equal(got, plain) {
						err = errors.New("plaintext differs")
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestChunkIDText(t *testing.T) {
	k := testKeys(t)
	id := k.ChunkID(blake3.Sum256([]byte("x")))
	s := id.String()
	if len(s) != 64 || strings.ToLower(s) != s {
		t.Fatalf("String() = %q", s)
	}
	got, err := ParseChunkID(s)
	if err != nil || got != id {
		t.Fatalf("ParseChunkID = %v, %v", got, err)
	}
	for _, bad := range []string{"", s[:63], s + "0", strings.ToUpper(s), "g" + s[1:], s[:62] + " 0"} {
		if _, err := ParseChunkID(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseChunkID(%q) err = %v, want ErrFormat", bad, err)
		}
	}
	var u ChunkID
	if err := u.UnmarshalText([]byte(s)); err != nil || u != id {
		t.Fatalf("UnmarshalText = %v, %v", u, err)
	}
}

func TestSealChunkCompressionProbe(t *testing.T) {
	k, err := DeriveKeys(FolderKey{3})
	if err != nil {
		t.Fatal(err)
	}
	rnd := func(n int) []byte {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	text := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 1<<20/45)
	randomHead := append(rnd(compressProbe), make([]byte, 1<<20-compressProbe)...)
	for _, c := range []struct {
		name       string
		plain      []byte
		compressed bool
	}{
		{"compressible", text, true},
		{"random", rnd(1 << 20), false},
		{"small random", rnd(2 * compressProbe), false},
		{"small text", text[:2*compressProbe], true},
		// The probe sees only random bytes, so the zeros after them are
		// not compressed either: the price of deciding from a prefix.
		{"random head, zero tail", randomHead, false},
	} {
		h := blake3.Sum256(c.plain)
		id, body, err := k.SealChunk(c.plain, h, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(body) < len(c.plain)/2; got != c.compressed {
			t.Errorf("%s: %d bytes sealed to %d; compressed = %v, want %v", c.name, len(c.plain), len(body), got, c.compressed)
		}
		plain, err := k.OpenChunk(id, body)
		if err != nil || !bytes.Equal(plain, c.plain) {
			t.Errorf("%s: does not open back: %v", c.name, err)
		}
	}
}

func TestSealChunkToReusesBuffer(t *testing.T) {
	k, err := DeriveKeys(FolderKey{4})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 1000, 300 << 10} {
		plain := make([]byte, n)
		if _, err := rand.Read(plain); err != nil {
			t.Fatal(err)
		}
		h := blake3.Sum256(plain)
		wantID, want, err := k.SealChunk(plain, h, true)
		if err != nil {
			t.Fatal(err)
		}
		// A dirty buffer with room is used, and its old bytes never leak
		// into the padding.
		dirty := bytes.Repeat([]byte{0xee}, SealedChunkLen(n))
		id, got, err := k.SealChunkTo(dirty[:0], plain, h, true)
		if err != nil || id != wantID || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: SealChunkTo differs from SealChunk (%v)", n, err)
		}
		if &got[0] != &dirty[0] {
			t.Fatalf("%d bytes: the buffer with room was not used", n)
		}
		// Too small a buffer: a new one, same bytes.
		if _, got, _ := k.SealChunkTo(make([]byte, 0, 10), plain, h, true); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: differs with a small buffer", n)
		}
	}
}

func TestOpenChunkToReusesBuffer(t *testing.T) {
	k, err := DeriveKeys(FolderKey{5})
	if err != nil {
		t.Fatal(err)
	}
	text := bytes.Repeat([]byte("compressible "), 20000)
	random := make([]byte, 200<<10)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	for _, plain := range [][]byte{random, text} {
		id, body, err := k.SealChunk(plain, blake3.Sum256(plain), true)
		if err != nil {
			t.Fatal(err)
		}
		dst := bytes.Repeat([]byte{0xee}, len(body))
		got, err := k.OpenChunkTo(dst[:0], id, body)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("OpenChunkTo: %v", err)
		}
		body[len(body)/2] ^= 1
		if _, err := k.OpenChunkTo(dst[:0], id, body); !errors.Is(err, ErrAuth) {
			t.Fatalf("tampered body into a reused buffer: %v", err)
		}
	}
}
