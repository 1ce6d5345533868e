package crypt

import (
	"fmt"
	"testing"

	"github.com/zeebo/blake3"
)

const benchChunkSize = 400 << 10

func benchPlaintexts(b *testing.B) map[string][]byte {
	return map[string][]byte{
		"random":       randomBytes(b, benchChunkSize),
		"compressible": compressible(benchChunkSize),
	}
}

func BenchmarkSealChunk(b *testing.B) {
	k := testKeys(b)
	for _, kind := range []string{"random", "compressible"} {
		plain := benchPlaintexts(b)[kind]
		hash := blake3.Sum256(plain)
		for _, compress := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/compress=%v", kind, compress), func(b *testing.B) {
				b.SetBytes(int64(len(plain)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := k.SealChunk(plain, hash, compress); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkOpenChunk(b *testing.B) {
	k := testKeys(b)
	for _, kind := range []string{"random", "compressible"} {
		plain := benchPlaintexts(b)[kind]
		for _, compress := range []bool{false, true} {
			id, body := sealed(b, k, plain, compress)
			b.Run(fmt.Sprintf("%s/compress=%v", kind, compress), func(b *testing.B) {
				b.SetBytes(int64(len(plain)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := k.OpenChunk(id, body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkSealRecord(b *testing.B) {
	k := testKeys(b)
	h := testHeader(k)
	payload := randomBytes(b, 4<<10)
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := k.SealRecord(h, payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeriveKeys(b *testing.B) {
	for b.Loop() {
		if _, err := DeriveKeys(fixedFolderKey()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFileKey(b *testing.B) {
	k := testKeys(b)
	b.ReportAllocs()
	for b.Loop() {
		k.FileKey("photos/2024/holiday/IMG_0042.jpg")
	}
}
