package chunk

import (
	"bytes"
	"fmt"
	"testing"
	"testing/iotest"
)

// FuzzSplit feeds streams built from a fuzzed pattern, repeated up to a
// fuzzed length of a few MaxSize, and checks the package invariants and that
// read sizes never move a boundary.
func FuzzSplit(f *testing.F) {
	f.Add([]byte{}, uint32(0))
	f.Add([]byte{0}, uint32(MinSize+1))
	f.Add([]byte{0xab}, uint32(MaxSize+1))
	f.Add([]byte("lockstep chunk boundary fuzz seed, longer than the 64-byte window of the chunker"), uint32(3*MaxSize))
	f.Add(prngBytes(f, 11, 4096), uint32(2*MaxSize+MinSize))
	s := newTestSplitter(f, testPol)
	f.Fuzz(func(t *testing.T, pattern []byte, length uint32) {
		n := int(length % (3*MaxSize + 2))
		if len(pattern) == 0 {
			pattern = []byte{0}
		}
		data := bytes.Repeat(pattern, n/len(pattern)+1)[:n]
		cs, err := s.Chunks(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		checkChunks(t, data, cs)
		half, err := s.Chunks(iotest.HalfReader(bytes.NewReader(data)))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(half) != fmt.Sprint(cs) {
			t.Fatal("half-size reads move the boundaries")
		}
	})
}
