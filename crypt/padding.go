package crypt

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// padme returns the Padmé padded length of n (Nikitin et al., "Reducing
// Metadata Leakage from Encrypted Files and Communication with PURBs", PETS
// 2019): n rounded up so that only the top ⌊log2 ⌊log2 n⌋⌋+1 bits below the
// leading one may be set. The overhead is at most about 12% and lengths of
// similar magnitude collapse into few buckets. padme(n) = n for n < 8.
func padme(n int) int {
	if n < 2 {
		return n
	}
	e := bits.Len(uint(n)) - 1 // ⌊log2 n⌋
	s := bits.Len(uint(e))     // ⌊log2 e⌋ + 1
	mask := 1<<(e-s) - 1
	return (n + mask) &^ mask
}

// Inner record flags.
const (
	flagZstd  = 1 << 0
	flagsMask = flagZstd
)

// innerLen returns the padded length of the inner record holding payloadLen
// bytes: flags byte, uvarint length, payload, padding.
func innerLen(payloadLen int) int {
	return padme(1 + uvarintLen(uint64(payloadLen)) + payloadLen)
}

// putInner writes the inner record flags || uvarint(len(payload)) ||
// payload || zero padding into dst, which must be innerLen(len(payload))
// bytes long and may hold garbage.
func putInner(dst []byte, flags byte, payload []byte) {
	dst[0] = flags
	n := 1 + binary.PutUvarint(dst[1:], uint64(len(payload)))
	n += copy(dst[n:], payload)
	clear(dst[n:])
}

// parseInner splits an opened inner record. It is strict: only known flags,
// a minimal uvarint, a length within the record and the limit, padding of
// exactly the Padmé length and all zeros. Errors wrap ErrFormat or
// ErrTooLarge; payload aliases inner.
func parseInner(inner []byte, limit int) (flags byte, payload []byte, err error) {
	if len(inner) < 2 {
		return 0, nil, fmt.Errorf("%w: inner record of %d bytes", ErrFormat, len(inner))
	}
	flags = inner[0]
	if flags&^flagsMask != 0 {
		return 0, nil, fmt.Errorf("%w: unknown flags %#04x", ErrFormat, flags)
	}
	size, n := binary.Uvarint(inner[1:])
	if n <= 0 || n != uvarintLen(size) {
		return 0, nil, fmt.Errorf("%w: bad payload length", ErrFormat)
	}
	start := 1 + n
	if size > uint64(len(inner)-start) {
		return 0, nil, fmt.Errorf("%w: payload length %d exceeds record", ErrFormat, size)
	}
	if size > uint64(limit) {
		return 0, nil, fmt.Errorf("%w: payload of %d bytes (limit %d)", ErrTooLarge, size, limit)
	}
	end := start + int(size)
	if innerLen(int(size)) != len(inner) {
		return 0, nil, fmt.Errorf("%w: padding length", ErrFormat)
	}
	for _, b := range inner[end:] {
		if b != 0 {
			return 0, nil, fmt.Errorf("%w: padding is not zero", ErrFormat)
		}
	}
	return flags, inner[start:end:end], nil
}

// uvarintLen is the length of the minimal uvarint encoding of v.
func uvarintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}
