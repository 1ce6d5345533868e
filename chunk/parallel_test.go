package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
)

// splitters returns n Splitters with the test polynomial.
func splitters(t testing.TB, n int) []*Splitter {
	sps := make([]*Splitter, n)
	for i := range sps {
		sps[i] = newTestSplitter(t, testPol)
	}
	return sps
}

// parallelChunks collects what splitParallel reports.
func parallelChunks(t *testing.T, data []byte, sps []*Splitter, minSegment int64) []Chunk {
	t.Helper()
	var got []Chunk
	err := splitParallel(context.Background(), bytes.NewReader(data), int64(len(data)), sps, minSegment, func(c Chunk) error {
		got = append(got, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSplitParallelSameChunks checks that cutting in parts and stitching
// gives exactly the sequential chunks, for data whose parts' cuts line up
// at once (random), never (a run of one byte value cuts only at MaxSize;
// zeros cut at every MinSize from wherever a chunk starts), and for a mix,
// with part boundaries at many offsets.
func TestSplitParallelSameChunks(t *testing.T) {
	random := prngBytes(t, 3, 24<<20+12345)
	mixed := slices.Clone(random)
	copy(mixed[5<<20:], bytes.Repeat([]byte{0x55}, 9<<20)) // spans several parts
	copy(mixed[17<<20:], make([]byte, 3<<20))
	cases := []struct {
		name string
		data []byte
	}{
		{"random", random},
		{"one value", bytes.Repeat([]byte{0x55}, 20<<20+7)},
		{"zeros", make([]byte, 20<<20+7)},
		{"mixed", mixed},
		{"short", random[:MinSize-1]},
		{"empty", nil},
	}
	workerCounts, minSegments := []int{1, 2, 3, 7}, []int64{1 << 20, 3<<20 + 1, MinSegment}
	if raceEnabled {
		// The race detector slows the Rabin loop tenfold; one setting with
		// several parts still has goroutines to watch.
		workerCounts, minSegments = []int{3}, []int64{3<<20 + 1}
	}
	seq := newTestSplitter(t, testPol)
	for _, tc := range cases {
		want, err := seq.Chunks(bytes.NewReader(tc.data))
		if err != nil {
			t.Fatal(err)
		}
		for _, workers := range workerCounts {
			for _, minSegment := range minSegments {
				t.Run(fmt.Sprintf("%s/%d/%d", tc.name, workers, minSegment), func(t *testing.T) {
					got := parallelChunks(t, tc.data, splitters(t, workers), minSegment)
					if !slices.Equal(got, want) {
						t.Fatalf("%d chunks, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
					}
				})
			}
		}
	}
}

func firstDiff(a, b []Chunk) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// failingReaderAt fails every read that reaches past off.
type failingReaderAt struct {
	r   io.ReaderAt
	off int64
}

var errDisk = errors.New("disk says no")

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.off {
		return 0, errDisk
	}
	return f.r.ReadAt(p, off)
}

func TestSplitParallelErrors(t *testing.T) {
	data := prngBytes(t, 4, 12<<20)
	for _, failAt := range []int64{100, 5 << 20, 11 << 20} {
		r := failingReaderAt{bytes.NewReader(data), failAt}
		err := splitParallel(context.Background(), r, int64(len(data)), splitters(t, 3), 1<<20, func(Chunk) error { return nil })
		if !errors.Is(err, errDisk) {
			t.Errorf("read failing at %d: got %v, want the read error", failAt, err)
		}
	}
	// A stream shorter than its size: the chunks of what it holds, even
	// when the first part reads nothing.
	seq := newTestSplitter(t, testPol)
	for _, holds := range []int{0, 100, 1 << 20, 5<<20 + 3, 11 << 20} {
		want, err := seq.Chunks(bytes.NewReader(data[:holds]))
		if err != nil {
			t.Fatal(err)
		}
		var got []Chunk
		err = splitParallel(context.Background(), bytes.NewReader(data[:holds]), int64(len(data)), splitters(t, 3), 1<<20, func(c Chunk) error {
			got = append(got, c)
			return nil
		})
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("stream of %d bytes for %d: %d chunks, %v; want %d", holds, len(data), len(got), err, len(want))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := splitParallel(ctx, bytes.NewReader(data), int64(len(data)), splitters(t, 3), 1<<20, func(Chunk) error {
		t.Fatal("fn called after ctx ended")
		return nil
	}); !errors.Is(err, context.Canceled) {
		t.Errorf("ended ctx: %v", err)
	}
	stop := errors.New("enough")
	calls := 0
	err := splitParallel(context.Background(), bytes.NewReader(data), int64(len(data)), splitters(t, 3), 1<<20, func(Chunk) error {
		calls++
		if calls == 12 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 12 {
		t.Errorf("fn's error: got %v after %d calls, want it unchanged after 12", err, calls)
	}
}

// BenchmarkSplitParallel times SplitParallel with two goroutines against
// BenchmarkSplitHash's one.
func BenchmarkSplitParallel(b *testing.B) {
	data := prngBytes(b, 9, benchSize)
	sps := splitters(b, 2)
	b.SetBytes(benchSize)
	for b.Loop() {
		if err := SplitParallel(context.Background(), bytes.NewReader(data), benchSize, sps, func(Chunk) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
