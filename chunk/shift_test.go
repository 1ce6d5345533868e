package chunk

import (
	"bytes"
	"io"
	"testing"
)

const (
	shiftStreamSize = 256 << 20
	shiftSeed       = 0x10c857e9
)

// editResult says how an edited stream's chunks differ from the original's.
type editResult struct {
	added, removed int   // chunks only in the edited / only in the original list
	addedBytes     int64 // bytes of the added chunks: what a peer must fetch
}

func compareChunks(orig map[Hash]bool, edited []Chunk) editResult {
	var r editResult
	seen := make(map[Hash]bool, len(edited))
	for _, c := range edited {
		seen[c.Hash] = true
		if !orig[c.Hash] {
			r.added++
			r.addedBytes += int64(c.Size)
		}
	}
	for h := range orig {
		if !seen[h] {
			r.removed++
		}
	}
	return r
}

// TestShiftResistance chunks a 256 MiB pseudo-random stream, then three
// edited copies of it, streamed from a generator (never held in memory), and
// checks that an edit changes only the chunks around it. It also measures
// the real average chunk size quoted in the package comment.
func TestShiftResistance(t *testing.T) {
	if testing.Short() {
		t.Skip("chunks 1 GiB in all; skipped with -short")
	}
	if raceEnabled {
		t.Skip("chunks 1 GiB in all; too slow under the race detector")
	}
	s := newTestSplitter(t, testPol)
	stream := func(from, to int64) io.Reader { return newPRNGStream(shiftSeed, from, to) }
	const n, mid = shiftStreamSize, shiftStreamSize/2 + 12345

	base, err := s.Chunks(stream(0, n))
	if err != nil {
		t.Fatal(err)
	}
	orig := make(map[Hash]bool, len(base))
	var minSeen, maxSeen uint32 = MaxSize, 0
	for i, c := range base {
		orig[c.Hash] = true
		if i < len(base)-1 {
			minSeen, maxSeen = min(minSeen, c.Size), max(maxSeen, c.Size)
		}
	}
	avg := n / len(base)
	t.Logf("256 MiB: %d chunks, average %d B (%.1f KiB), smallest %d, largest %d (last excluded)",
		len(base), avg, float64(avg)/1024, minSeen, maxSeen)
	// Expected mean MinSize + 2^AverageBits = 384 KiB; with ~700 geometric
	// samples the standard error is about 10 KiB.
	if want := MinSize + 1<<AverageBits; avg < want-40<<10 || avg > want+40<<10 {
		t.Errorf("average chunk %d B, want %d ± 40 KiB", avg, want)
	}

	flipped := []byte{prngByte(shiftSeed, mid) ^ 0xff}
	edits := []struct {
		name       string
		r          io.Reader
		maxChanged int // bound on chunks added by the edit
	}{
		{"1-byte insert at start", io.MultiReader(bytes.NewReader([]byte{0x5a}), stream(0, n)), 2},
		{"1-byte overwrite in the middle", io.MultiReader(stream(0, mid), bytes.NewReader(flipped), stream(mid+1, n)), 3},
		// 1 MiB of new data holds at most 1 MiB/MinSize boundaries, plus the
		// chunks on either side of it.
		{"1 MiB insert in the middle", io.MultiReader(stream(0, mid), newPRNGStream(shiftSeed+1, 0, 1<<20), stream(mid, n)), 1<<20/MinSize + 3},
	}
	for _, e := range edits {
		cs, err := s.Chunks(e.r)
		if err != nil {
			t.Fatal(err)
		}
		r := compareChunks(orig, cs)
		t.Logf("%s: %d chunks added (%.1f KiB to send), %d removed, of %d",
			e.name, r.added, float64(r.addedBytes)/1024, r.removed, len(cs))
		if r.added == 0 {
			t.Errorf("%s: no chunk changed", e.name)
		}
		if r.added > e.maxChanged {
			t.Errorf("%s: %d chunks changed, want at most %d", e.name, r.added, e.maxChanged)
		}
	}
}
