package protocol

import "testing"

func TestBufferClasses(t *testing.T) {
	sizes := []int{0, 1, 1023, 1024, 1025, 1280, 1281, 4095, 4096, 700 << 10, 1<<20 - 1, 1 << 20, 1<<20 + 1, 1100 << 10, 8 << 20, 8<<20 + 1, 10 << 20, 10<<20 + 1, 12 << 20}
	for _, n := range sizes {
		b := getBuf(n)
		if len(b) != 0 || cap(b) < n {
			t.Errorf("getBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		// A buffer is at most a quarter larger than asked for.
		if limit := max(n+n/4, minPooledSize); n <= maxPooledSize && cap(b) > limit {
			t.Errorf("getBuf(%d): cap %d, want at most %d", n, cap(b), limit)
		}
		putBuf(b)
	}
	// Every buffer given back serves only requests it can hold.
	for _, n := range []int{1024, 1100, 1300, 3 << 20, 9 << 20, 11 << 20} {
		c := classAtLeast(min(n, maxPooledSize))
		if classSizes[c] > n {
			c--
		}
		if classSizes[c] > n || (c+1 < len(classSizes) && classSizes[c+1] <= n) {
			t.Errorf("a buffer of %d goes to class %d (%d bytes)", n, c, classSizes[c])
		}
	}
	for i := 1; i < len(classSizes); i++ {
		if classSizes[i] <= classSizes[i-1] {
			t.Fatalf("classes not ascending at %d: %v", i, classSizes)
		}
	}
	if last := classSizes[len(classSizes)-1]; last != maxPooledSize {
		t.Errorf("largest class %d, want %d", last, maxPooledSize)
	}
}
