package protocol

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestBatchFiles(t *testing.T) {
	if got := BatchFiles(nil, 0); got != nil {
		t.Fatalf("no files: %d batches", len(got))
	}
	var files []*FileInfo
	for i := range 50_000 {
		files = append(files, testFile(i, i%5))
	}
	batches := BatchFiles(files, 0)
	if len(batches) < 2 {
		t.Fatalf("%d files in %d batch", len(files), len(batches))
	}
	var joined []*FileInfo
	for i, b := range batches {
		size := proto.Size(&Index{Files: b})
		if size > MaxBatchSize {
			t.Errorf("batch %d: %d bytes, limit %d", i, size, MaxBatchSize)
		}
		if i < len(batches)-1 {
			// Not split too early: the next file would not have fitted.
			next := batches[i+1][0]
			if size+fileFieldSize(next) <= MaxBatchSize {
				t.Errorf("batch %d of %d bytes ends although the next file (%d bytes) fits", i, size, fileFieldSize(next))
			}
		}
		joined = append(joined, b...)
	}
	if len(joined) != len(files) {
		t.Fatalf("batches hold %d files, want %d", len(joined), len(files))
	}
	for i := range files {
		if joined[i] != files[i] {
			t.Fatalf("file %d out of order", i)
		}
	}
}

func TestBatchFilesBoundaries(t *testing.T) {
	files := []*FileInfo{testFile(1, 2), testFile(2, 2), testFile(3, 2)}
	one := fileFieldSize(files[0])
	for _, f := range files {
		if fileFieldSize(f) != one {
			t.Fatal("test files differ in size")
		}
	}
	for _, tc := range []struct {
		max  int
		want []int // batch lengths
	}{
		{2*one - 1, []int{1, 1, 1}},
		{2 * one, []int{2, 1}},
		{2*one + 1, []int{2, 1}},
		{3*one - 1, []int{2, 1}},
		{3 * one, []int{3}},
		{one - 1, []int{1, 1, 1}}, // each file alone, though over the limit
	} {
		got := BatchFiles(files, tc.max)
		if len(got) != len(tc.want) {
			t.Errorf("max %d: %d batches, want %d", tc.max, len(got), len(tc.want))
			continue
		}
		for i := range got {
			if len(got[i]) != tc.want[i] {
				t.Errorf("max %d: batch %d has %d files, want %d", tc.max, i, len(got[i]), tc.want[i])
			}
			if size := proto.Size(&IndexUpdate{Files: got[i]}); size != len(got[i])*one {
				t.Errorf("max %d: batch %d encodes to %d bytes, want %d", tc.max, i, size, len(got[i])*one)
			}
		}
	}
	// Appending to a batch must not overwrite the next one.
	got := BatchFiles(files, 2*one)
	_ = append(got[0], testFile(9, 0))
	if got[1][0] != files[2] {
		t.Fatal("appending to a batch overwrote the next")
	}
}
