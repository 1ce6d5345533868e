// Package chunk cuts byte streams into content-defined chunks and names each
// chunk by the BLAKE3-256 hash of its plaintext.
//
// Boundaries come from a Rabin fingerprint over a 64-byte sliding window
// with a per-folder secret polynomial (github.com/restic/chunker's, computed
// four windows at a time: see rabin.go), so an edit
// moves only the boundaries within a window of it: an insert or delete near
// the start of a file changes one or two chunks, not all that follow.
//
// Invariants:
//   - The chunks of a stream cover it contiguously, in order, from offset 0;
//     their sizes sum to the stream's length. An empty stream has no chunks.
//   - Every chunk is at most MaxSize bytes, and every chunk but the last is at
//     least MinSize bytes; a stream shorter than MinSize is one chunk.
//   - The same polynomial and the same bytes give the same chunks, on every
//     device, in every version: boundaries are part of the on-disk and
//     on-wire format, so MinSize, MaxSize and AverageBits never change for
//     an existing folder.
//   - Hash is BLAKE3-256 of exactly the chunk's bytes.
//   - The package keeps no state beyond its constants and the fingerprint's
//     lookup tables, cached per polynomial, and does no I/O beyond
//     reading the reader it is given. Only SplitParallel starts goroutines,
//     and it waits for them.
//
// # Choosing the sizes
//
// The chunker skips the first MinSize-64 bytes of each chunk, then cuts where
// the low AverageBits bits of the fingerprint are zero, so a chunk's size is
// MinSize plus a geometric variable with mean 2^AverageBits, truncated at
// MaxSize: the expected size is MinSize + 2^AverageBits = 128 KiB + 256 KiB
// = 384 KiB (the chance of reaching MaxSize on random data is e^-15.5).
//
// Measured on a 256 MiB pseudo-random stream (TestShiftResistance), with
// the sizes below:
//
//	chunks                           676
//	average size                     388 KiB (smallest 128.3 KiB, largest 1.46 MiB)
//	1-byte insert at the start       1 chunk changed, 223 KiB to send
//	1-byte overwrite in the middle   1 chunk changed, 529 KiB to send
//	1 MiB insert in the middle       4 chunks changed, 1.5 MiB to send
//
// Smaller chunks make a small edit cheaper to send, but every chunk costs a
// row in each device's index (hash, keyed ID, size: about 100 bytes), one
// request to a peer or receiver, one object or pack entry and its metadata
// on a receiver, and a share of an fsync batch; the chunker's cost per byte
// does not depend on the chunk size. The same stream and edits, other sizes:
//
//	min     average  chunks/TiB  one small edit resends
//	 64 KiB  193 KiB     5.6 M        ~190 KiB
//	128 KiB  256 KiB     4.2 M        ~260 KiB
//	128 KiB  388 KiB     2.8 M        ~390 KiB   <- chosen (AverageBits 18)
//	256 KiB  509 KiB     2.1 M        ~510 KiB
//	256 KiB  762 KiB     1.4 M        ~760 KiB
//	512 KiB  1.5 MiB     0.7 M        ~2.2 MiB   (restic's min and average)
//
// 384 KiB keeps a one-byte edit under half a MiB while a 1 TiB folder stays
// under 3 million chunks (an index of roughly 300 MB, a restore of 2.8
// million requests, packed into 16 MiB objects on S3). Going smaller doubles
// those counts to save a couple of hundred KiB per edit; going larger makes
// every small edit cost close to a MiB or more. MaxSize 4 MiB bounds the
// memory of a Splitter and of one request, and is reached only by
// low-entropy data.
//
// On one core of the 2-core dev machine (BenchmarkSplit, BenchmarkSplitHash,
// BenchmarkHash): cutting alone ~1.85 GB/s (the chunker's own loop ~700
// MB/s), cutting and hashing ~1.2 GB/s (~580 MB/s), BLAKE3 alone ~3.8
// GB/s. Cutting is sequential by nature, but a file can be cut in parts by
// several goroutines and the parts' chunks stitched where they meet
// (SplitParallel): on both cores, ~2.3 GB/s (BenchmarkSplitParallel; ~1.1
// GB/s with the chunker's loop).
//
// A long run of one byte value repeats the fingerprint of its window: for
// zeros that fingerprint is 0, so runs of zeros (sparse files, disk images)
// cut at every MinSize and deduplicate to one 128 KiB chunk; most other
// values never cut and give MaxSize chunks.
package chunk

import (
	"encoding/hex"
	"errors"

	"github.com/zeebo/blake3"
)

// Chunking parameters. They are part of the format: changing one changes the
// chunks of every file (see the package comment for why these values).
const (
	// MinSize is the smallest chunk but the last of a stream: 128 KiB.
	MinSize = 128 << 10
	// MaxSize is the largest chunk: 4 MiB.
	MaxSize = 4 << 20
	// AverageBits sets the cut probability after MinSize to 2^-AverageBits
	// per byte, so the average chunk is MinSize + 2^AverageBits = 384 KiB.
	AverageBits = 18
	// PolynomialDegree is the degree every chunking polynomial must have, the
	// one chunker.RandomPolynomial and chunker.DerivePolynomial produce.
	PolynomialDegree = 53
)

// ErrPolynomial reports a chunking polynomial that is reducible or not of
// degree PolynomialDegree.
var ErrPolynomial = errors.New("chunk: invalid chunking polynomial")

// HashSize is the length of a Hash in bytes.
const HashSize = 32

// Hash is the BLAKE3-256 of a chunk's plaintext.
type Hash [HashSize]byte

// String returns h in lower-case hex, 64 characters.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// HashOf returns the BLAKE3-256 hash of data.
func HashOf(data []byte) Hash { return blake3.Sum256(data) }

// Chunk describes one chunk of a stream: where it starts, how long it is and
// the hash of its bytes.
type Chunk struct {
	Offset int64  // position of the chunk's first byte in the stream
	Size   uint32 // length in bytes, 1..MaxSize
	Hash   Hash   // BLAKE3-256 of the chunk's bytes
}
