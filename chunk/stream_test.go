package chunk

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/restic/chunker"
)

// testPol is restic/chunker's own test polynomial: irreducible, degree 53.
const testPol = chunker.Pol(0x3DA3358B4DC173)

// otherPol derives a second irreducible polynomial from a fixed seed.
func otherPol(t testing.TB) chunker.Pol {
	t.Helper()
	src := rand.NewChaCha8([32]byte{'l', 'o', 'c', 'k', 's', 't', 'e', 'p'})
	pol, err := chunker.DerivePolynomial(src)
	if err != nil {
		t.Fatal(err)
	}
	if pol == testPol {
		t.Fatal("derived polynomial equals testPol")
	}
	return pol
}

func newTestSplitter(t testing.TB, pol chunker.Pol) *Splitter {
	t.Helper()
	s, err := NewSplitter(pol)
	if err != nil {
		t.Fatalf("NewSplitter(%v): %v", pol, err)
	}
	return s
}

// prngStream is a reader over bytes [pos, end) of an endless pseudo-random
// stream fixed by seed. Byte i depends only on seed and i, so pieces of the
// same stream can be spliced with io.MultiReader without holding it in memory.
type prngStream struct {
	seed     uint64
	pos, end int64
}

func newPRNGStream(seed uint64, from, to int64) *prngStream {
	return &prngStream{seed: seed, pos: from, end: to}
}

// prngWord is splitmix64 of the seeded word index: 8 bytes of the stream.
func prngWord(seed, idx uint64) uint64 {
	z := seed + (idx+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// prngByte is byte i of the stream fixed by seed.
func prngByte(seed uint64, i int64) byte {
	return byte(prngWord(seed, uint64(i)/8) >> (8 * (uint64(i) % 8)))
}

func (p *prngStream) Read(b []byte) (int, error) {
	if p.pos >= p.end {
		return 0, io.EOF
	}
	if rem := p.end - p.pos; int64(len(b)) > rem {
		b = b[:rem]
	}
	n := 0
	for n < len(b) && (p.pos+int64(n))%8 != 0 {
		b[n] = prngByte(p.seed, p.pos+int64(n))
		n++
	}
	for idx := uint64(p.pos+int64(n)) / 8; n+8 <= len(b); n, idx = n+8, idx+1 {
		binary.LittleEndian.PutUint64(b[n:], prngWord(p.seed, idx))
	}
	for ; n < len(b); n++ {
		b[n] = prngByte(p.seed, p.pos+int64(n))
	}
	p.pos += int64(n)
	return n, nil
}

// prngBytes returns bytes [0, n) of the stream fixed by seed.
func prngBytes(t testing.TB, seed uint64, n int) []byte {
	t.Helper()
	b, err := io.ReadAll(newPRNGStream(seed, 0, int64(n)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPRNGStreamSplice checks the generator itself: any split of a range
// into pieces reads the same bytes as the whole range, whatever the
// alignment, so spliced streams in the shift tests are what they claim.
func TestPRNGStreamSplice(t *testing.T) {
	whole := prngBytes(t, 7, 1000)
	for _, cut := range []int64{0, 1, 7, 8, 9, 500, 999, 1000} {
		got, err := io.ReadAll(io.MultiReader(newPRNGStream(7, 0, cut), newPRNGStream(7, cut, 1000)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, whole) {
			t.Fatalf("splice at %d differs from the whole stream", cut)
		}
	}
	if bytes.Equal(whole, prngBytes(t, 8, 1000)) {
		t.Fatal("seeds 7 and 8 give the same stream")
	}
	// Byte-by-byte reads hit the unaligned paths only.
	var one [1]byte
	p := newPRNGStream(7, 3, 20)
	for i := int64(3); i < 20; i++ {
		if _, err := p.Read(one[:]); err != nil || one[0] != whole[i] {
			t.Fatalf("byte %d: got %#x, %v; want %#x", i, one[0], err, whole[i])
		}
	}
	if n, err := p.Read(one[:]); n != 0 || err != io.EOF {
		t.Fatalf("read past end: %d, %v", n, err)
	}
}
