package crypt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"testing"
)

func TestPadmeValues(t *testing.T) {
	// Worked by hand from the definition: E = ⌊log2 L⌋, S = ⌊log2 E⌋+1,
	// round L up to a multiple of 2^(E-S).
	for _, c := range []struct{ in, want int }{
		{0, 0}, {1, 1}, {2, 2}, {3, 3}, {7, 7},
		{8, 8}, {9, 10}, {10, 10}, {11, 12}, {15, 16}, {16, 16}, {17, 18},
		{31, 32}, {32, 32}, {33, 36}, {63, 64}, {64, 64}, {65, 72},
		{255, 256}, {256, 256}, {257, 272}, {1000, 1024}, {1025, 1088},
		{65535, 65536}, {65536, 65536}, {65537, 67584},
		{400 << 10, 400 << 10}, {400<<10 + 1, 400<<10 + 8192},
		{1<<23 - 1, 1 << 23}, {1 << 23, 1 << 23}, {1<<23 + 1, 1<<23 + 1<<18},
	} {
		if got := padme(c.in); got != c.want {
			t.Errorf("padme(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestPadmeProperties checks every length up to 2^20 and boundaries beyond:
// never shorter, idempotent, monotone, at most 12% overhead, and the low
// E-S bits zero.
func TestPadmeProperties(t *testing.T) {
	check := func(n, prev int) int {
		p := padme(n)
		if p < n || padme(p) != p || p < prev {
			t.Fatalf("padme(%d) = %d (previous %d)", n, p, prev)
		}
		if n >= 2 {
			e := bits.Len(uint(n)) - 1
			low := e - bits.Len(uint(e))
			if p&(1<<low-1) != 0 {
				t.Fatalf("padme(%d) = %d has low bits set", n, p)
			}
			if float64(p-n) > 0.12*float64(n) {
				t.Fatalf("padme(%d) = %d: overhead above 12%%", n, p)
			}
		}
		return p
	}
	prev := 0
	for n := 0; n <= 1<<20; n++ {
		prev = check(n, prev)
	}
	for s := 21; s < 40; s++ {
		for _, n := range []int{1<<s - 1, 1 << s, 1<<s + 1} {
			check(n, 0)
		}
	}
}

func TestUvarintLen(t *testing.T) {
	var buf [binary.MaxVarintLen64]byte
	for s := 0; s < 64; s++ {
		for _, v := range []uint64{1<<s - 1, 1 << s, 1<<s + 1} {
			if got, want := uvarintLen(v), binary.PutUvarint(buf[:], v); got != want {
				t.Fatalf("uvarintLen(%d) = %d, want %d", v, got, want)
			}
		}
	}
	if got := uvarintLen(^uint64(0)); got != 10 {
		t.Fatalf("uvarintLen(max) = %d", got)
	}
}

func TestInnerRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 5, 6, 7, 126, 127, 128, 129, 16383, 16384, 16385} {
		payload := bytes.Repeat([]byte{0xa5}, n)
		for _, flags := range []byte{0, flagZstd} {
			inner := makeInner(flags, payload)
			if len(inner) != padme(1+uvarintLen(uint64(n))+n) {
				t.Fatalf("len %d: inner of %d bytes", n, len(inner))
			}
			f, p, err := parseInner(inner, n)
			if err != nil || f != flags || !bytes.Equal(p, payload) {
				t.Fatalf("len %d: parseInner = %x, %d bytes, %v", n, f, len(p), err)
			}
			if cap(p) != len(p) {
				t.Fatalf("len %d: payload has spare capacity %d", n, cap(p))
			}
			// Limit n-1 is too large; n and n+1 are fine.
			if n > 0 {
				if _, _, err := parseInner(inner, n-1); !errors.Is(err, ErrTooLarge) {
					t.Fatalf("len %d, limit %d: err = %v, want ErrTooLarge", n, n-1, err)
				}
			}
			if _, _, err := parseInner(inner, n+1); err != nil {
				t.Fatalf("len %d, limit %d: %v", n, n+1, err)
			}
		}
	}
}

func TestParseInnerRejects(t *testing.T) {
	payload := []byte("hello, padded world") // 19 bytes: inner 21 -> 22
	good := makeInner(0, payload)
	if len(good) != 22 {
		t.Fatalf("inner is %d bytes, want 22", len(good))
	}
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, c := range map[string]struct {
		inner []byte
		want  error
	}{
		"empty":             {nil, ErrFormat},
		"one byte":          {[]byte{0}, ErrFormat},
		"unknown flag":      {mut(func(b []byte) []byte { b[0] = 2; return b }), ErrFormat},
		"high flag":         {mut(func(b []byte) []byte { b[0] = 0x80; return b }), ErrFormat},
		"nonzero padding":   {mut(func(b []byte) []byte { b[21] = 1; return b }), ErrFormat},
		"extra padding":     {append(bytes.Clone(good), 0, 0), ErrFormat},
		"short padding":     {good[:21], ErrFormat},
		"length too long":   {mut(func(b []byte) []byte { b[1] = 21; return b }), ErrFormat},
		"length too short":  {mut(func(b []byte) []byte { b[1] = 18; return b }), ErrFormat},
		"non-minimal":       {append([]byte{0, 0x80 | 7, 0}, "1234567"...), ErrFormat},
		"overflowing":       {append([]byte{0}, bytes.Repeat([]byte{0xff}, 11)...), ErrFormat},
		"truncated varint":  {[]byte{0, 0x80}, ErrFormat},
		"huge length":       {[]byte{0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0}, ErrFormat},
		"length over limit": {makeInner(0, make([]byte, 30)), ErrTooLarge},
	} {
		if _, _, err := parseInner(c.inner, 20); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
	// The non-minimal case has the right padded length (10 = padme(9)):
	// only the length's encoding is wrong, as its minimal twin shows.
	if _, p, err := parseInner(append([]byte{0, 7}, "1234567\x00"...), 20); err != nil || string(p) != "1234567" {
		t.Fatalf("minimal twin: %q, %v", p, err)
	}
}
