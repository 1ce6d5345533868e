package testutil

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

var _ io.Writer = (*LockedBuffer)(nil)

func TestLockedBufferConcurrentWrites(t *testing.T) {
	var b LockedBuffer
	if b.String() != "" {
		t.Fatalf("zero value holds %q", b.String())
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				line := fmt.Sprintf("writer %d line %d\n", i, j)
				if n, err := b.Write([]byte(line)); n != len(line) || err != nil {
					t.Errorf("Write = %d, %v", n, err)
				}
				_ = b.String() // reading while others write
			}
		})
	}
	wg.Wait()
	got := b.String()
	for i := range 8 {
		for j := range 100 {
			if !strings.Contains(got, fmt.Sprintf("writer %d line %d\n", i, j)) {
				t.Fatalf("line %d of writer %d is missing or torn", j, i)
			}
		}
	}
	if n := strings.Count(got, "\n"); n != 800 {
		t.Errorf("%d lines, want 800", n)
	}
}
