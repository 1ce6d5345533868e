package chunk

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/restic/chunker"
)

// cutPoint is where a chunk starts and how long it is.
type cutPoint struct{ off, size int64 }

// chunkerCuts cuts data with github.com/restic/chunker itself.
func chunkerCuts(t testing.TB, pol chunker.Pol, r io.Reader) []cutPoint {
	t.Helper()
	c := chunker.NewWithBoundaries(r, pol, MinSize, MaxSize)
	c.SetAverageBits(AverageBits)
	buf := make([]byte, MaxSize)
	var cuts []cutPoint
	for {
		ch, err := c.Next(buf)
		if err == io.EOF {
			return cuts
		}
		if err != nil {
			t.Fatal(err)
		}
		cuts = append(cuts, cutPoint{int64(ch.Start), int64(ch.Length)})
	}
}

// splitterCuts cuts data with a Splitter.
func splitterCuts(t testing.TB, s *Splitter, r io.Reader) []cutPoint {
	t.Helper()
	var cuts []cutPoint
	if err := s.cut(r, func(off int64, data []byte) error {
		cuts = append(cuts, cutPoint{off, int64(len(data))})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return cuts
}

// derivedPol is an irreducible polynomial derived from seed.
func derivedPol(t testing.TB, seed byte) chunker.Pol {
	t.Helper()
	pol, err := chunker.DerivePolynomial(rand.NewChaCha8([32]byte{seed}))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// runs is pseudo-random data with runs of one byte value in it, some
// longer than MaxSize, so that chunks end at cuts, at MaxSize, and right
// after a run.
func runs(t testing.TB, seed uint64, n int) []byte {
	data := prngBytes(t, seed, n)
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 12 {
		at := rng.IntN(n)
		end := min(n, at+rng.IntN(2*MaxSize))
		v := byte(rng.IntN(3)) // zero cuts at every MinSize, others never
		for i := at; i < end; i++ {
			data[i] = v
		}
	}
	return data
}

// TestCutMatchesChunker compares every boundary with the chunker's on
// pseudo-random data, runs of one value, and lengths around each limit,
// for several polynomials.
func TestCutMatchesChunker(t *testing.T) {
	pols := []chunker.Pol{testPol, otherPol(t), derivedPol(t, 1), derivedPol(t, 2)}
	if raceEnabled {
		pols = pols[:1] // the loops share nothing for the detector to check
	}
	random := prngBytes(t, 21, 24<<20)
	streams := map[string][]byte{
		"random": random,
		"runs":   runs(t, 22, 24<<20),
		"zeros":  make([]byte, 3*MaxSize+5),
	}
	for _, n := range []int{0, 1, windowSize, MinSize - 1, MinSize, MinSize + 1, MinSize + 4*laneLen, MinSize + 4*laneLen + 1, MaxSize - 1, MaxSize, MaxSize + 1, MaxSize + readSize + 1, 2*MaxSize + readSize} {
		streams[fmt.Sprintf("random[:%d]", n)] = random[:n]
	}
	for _, pol := range pols {
		s := newTestSplitter(t, pol)
		for name, data := range streams {
			want := chunkerCuts(t, pol, bytes.NewReader(data))
			if got := splitterCuts(t, s, bytes.NewReader(data)); !slices.Equal(got, want) {
				t.Errorf("%v, %s: cuts differ from the chunker's\n got %v\nwant %v", pol, name, got, want)
			}
		}
		// Short reads move nothing either.
		data := streams["runs"][:6<<20]
		want := chunkerCuts(t, pol, bytes.NewReader(data))
		if got := splitterCuts(t, s, iotest.HalfReader(bytes.NewReader(data))); !slices.Equal(got, want) {
			t.Errorf("%v, half reads: cuts differ from the chunker's\n got %v\nwant %v", pol, got, want)
		}
	}
}

// FuzzCutMatchesChunker compares boundaries with the chunker's on a
// fuzzed pattern repeated to a fuzzed length, with pseudo-random data
// around it, for a fuzzed polynomial.
func FuzzCutMatchesChunker(f *testing.F) {
	f.Add([]byte{0}, uint32(MinSize+1), byte(0), uint32(0))
	f.Add([]byte("abc"), uint32(MaxSize+7), byte(1), uint32(MinSize))
	f.Add([]byte{}, uint32(0), byte(2), uint32(3*MaxSize))
	random := prngBytes(f, 23, 4*MaxSize)
	pols := map[byte]chunker.Pol{}
	f.Fuzz(func(t *testing.T, pattern []byte, length uint32, polSeed byte, randomLen uint32) {
		pol, ok := pols[polSeed%4]
		if !ok {
			pol = derivedPol(t, polSeed%4)
			pols[polSeed%4] = pol
		}
		n := int(length % (2*MaxSize + 2))
		if len(pattern) == 0 {
			pattern = []byte{0}
		}
		data := append(random[:int(randomLen)%len(random):int(randomLen)%len(random)], bytes.Repeat(pattern, n/len(pattern)+1)[:n]...)
		data = append(data, random[:MinSize]...)
		s := newTestSplitter(t, pol)
		want := chunkerCuts(t, pol, bytes.NewReader(data))
		if got := splitterCuts(t, s, bytes.NewReader(data)); !slices.Equal(got, want) {
			t.Fatalf("cuts differ from the chunker's\n got %v\nwant %v", got, want)
		}
	})
}
