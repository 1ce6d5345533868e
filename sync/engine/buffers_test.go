package engine

import "testing"

func TestBlockPoolSizes(t *testing.T) {
	for _, n := range []int{1, 128<<10 - 1, 128 << 10, 128<<10 + 1, 400 << 10, 4 << 20, 8 << 20} {
		b := getBlock(n)
		if len(b) != n || cap(b) < n {
			t.Fatalf("getBlock(%d): len %d cap %d", n, len(b), cap(b))
		}
		putBlock(b)
		again := getBlock(n)
		if len(again) != n {
			t.Fatalf("reused getBlock(%d): len %d", n, len(again))
		}
	}
	big := getBlock(8<<20 + 1)
	if len(big) != 8<<20+1 {
		t.Fatal("oversized block")
	}
	putBlock(big) // not pooled, must not panic
	putBlock(make([]byte, 1000))
}
