package chunk

import (
	"bytes"
	"testing"
)

const benchSize = 64 << 20

// BenchmarkSplit times the chunker alone: reading and cutting, no hashing.
func BenchmarkSplit(b *testing.B) {
	data := prngBytes(b, 9, benchSize)
	s := newTestSplitter(b, testPol)
	r := bytes.NewReader(data)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(data)
		if err := s.cut(r, func(int64, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSplitHash times Split as callers use it: cutting plus BLAKE3.
func BenchmarkSplitHash(b *testing.B) {
	data := prngBytes(b, 9, benchSize)
	s := newTestSplitter(b, testPol)
	r := bytes.NewReader(data)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(data)
		if err := s.Split(r, func(Chunk, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHash times BLAKE3 over average-sized chunks.
func BenchmarkHash(b *testing.B) {
	data := prngBytes(b, 9, MinSize+1<<AverageBits)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		HashOf(data)
	}
}
