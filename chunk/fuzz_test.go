package chunk

import (
	"bytes"
	"context"
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

// FuzzSplitParallel cuts streams of pseudo-random data with fuzzed runs of
// one byte value in it (which cut differently depending on where a chunk
// starts) in a fuzzed number of parts, and checks the stitched chunks are
// the sequential ones.
func FuzzSplitParallel(f *testing.F) {
	f.Add(uint64(1), uint32(5*MaxSize), uint32(0), uint32(0), byte(0), uint8(3))
	f.Add(uint64(2), uint32(6*MaxSize), uint32(MaxSize), uint32(3*MaxSize), byte(0x55), uint8(4))
	f.Add(uint64(3), uint32(4*MaxSize+17), uint32(100), uint32(4*MaxSize), byte(0), uint8(2))
	f.Add(uint64(4), uint32(MaxSize), uint32(MinSize), uint32(MinSize), byte(7), uint8(9))
	seq := newTestSplitter(f, testPol)
	sps := splitters(f, 8)
	f.Fuzz(func(t *testing.T, seed uint64, length, runAt, runLen uint32, value byte, parts uint8) {
		n := int(length % (8*MaxSize + 1))
		data := prngBytes(t, seed, n)
		if n > 0 {
			at := int(runAt) % n
			copy(data[at:], bytes.Repeat([]byte{value}, min(int(runLen), n-at)))
		}
		want, err := seq.Chunks(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		k := 1 + int(parts)%len(sps)
		var got []Chunk
		err = splitParallel(context.Background(), bytes.NewReader(data), int64(n), sps[:k], max(1, int64(n/k)), func(c Chunk) error {
			got = append(got, c)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%d parts: %d chunks, want %d; first difference at %d", k, len(got), len(want), firstDiff(got, want))
		}
	})
}
