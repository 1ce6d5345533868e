package chunk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"github.com/restic/chunker"
)

// checkChunks asserts the package invariants for the chunks cs of data:
// contiguous cover from 0, size bounds, and hashes of the right bytes.
func checkChunks(t *testing.T, data []byte, cs []Chunk) {
	t.Helper()
	var off int64
	for i, c := range cs {
		if c.Offset != off {
			t.Fatalf("chunk %d: offset %d, want %d", i, c.Offset, off)
		}
		if c.Size == 0 || c.Size > MaxSize {
			t.Fatalf("chunk %d: size %d out of 1..%d", i, c.Size, MaxSize)
		}
		if i < len(cs)-1 && c.Size < MinSize {
			t.Fatalf("chunk %d of %d: size %d < MinSize", i, len(cs), c.Size)
		}
		end := off + int64(c.Size)
		if end > int64(len(data)) {
			t.Fatalf("chunk %d: ends at %d past the stream's %d bytes", i, end, len(data))
		}
		if h := HashOf(data[off:end]); h != c.Hash {
			t.Fatalf("chunk %d: hash %v, want %v", i, c.Hash, h)
		}
		off = end
	}
	if off != int64(len(data)) {
		t.Fatalf("chunks cover %d bytes, stream has %d", off, len(data))
	}
}

func sizesOf(cs []Chunk) []uint32 {
	s := make([]uint32, len(cs))
	for i, c := range cs {
		s[i] = c.Size
	}
	return s
}

func TestHashOf(t *testing.T) {
	// BLAKE3 test vectors: the empty input and the 1-byte input 0x00.
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{nil, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"},
		{[]byte{0}, "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213"},
	} {
		if got := HashOf(tc.in).String(); got != tc.want {
			t.Errorf("HashOf(%x) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestNewSplitterPolynomial(t *testing.T) {
	if _, err := NewSplitter(testPol); err != nil {
		t.Fatalf("irreducible degree-53 polynomial refused: %v", err)
	}
	if _, err := NewSplitter(otherPol(t)); err != nil {
		t.Fatalf("derived polynomial refused: %v", err)
	}
	bad := []struct {
		name string
		pol  chunker.Pol
	}{
		{"zero", 0},
		{"one", 1},
		{"divisible by x", testPol &^ 1},
		{"(x+1)(x^52+1)", chunker.Pol(3).Mul(1<<52 | 1)},
		{"degree 54", testPol | 1<<54},
		{"degree 52", testPol &^ (1 << 53)},
		{"degree 63", 1<<63 | 1},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSplitter(tc.pol)
			if !errors.Is(err, ErrPolynomial) || s != nil {
				t.Fatalf("NewSplitter(%v) = %v, %v; want nil, ErrPolynomial", tc.pol, s, err)
			}
		})
	}
}

func TestSplitEmpty(t *testing.T) {
	s := newTestSplitter(t, testPol)
	calls := 0
	err := s.Split(bytes.NewReader(nil), func(Chunk, []byte) error { calls++; return nil })
	if err != nil || calls != 0 {
		t.Fatalf("empty stream: %d calls, err %v; want 0, nil", calls, err)
	}
	cs, err := s.Chunks(bytes.NewReader(nil))
	if err != nil || len(cs) != 0 {
		t.Fatalf("Chunks(empty) = %v, %v", cs, err)
	}
}

// TestSplitSizes pins the boundaries at n-1, n, n+1 for the minimum and the
// maximum chunk size. Zeros cut at every MinSize (their window fingerprint
// is 0); a run of 0xab never matches with testPol, so it cuts at MaxSize.
func TestSplitSizes(t *testing.T) {
	s := newTestSplitter(t, testPol)
	for _, tc := range []struct {
		name string
		data []byte
		want []uint32
	}{
		{"1 byte", []byte{42}, []uint32{1}},
		{"random MinSize-1", prngBytes(t, 1, MinSize-1), []uint32{MinSize - 1}},
		{"random MinSize", prngBytes(t, 1, MinSize), []uint32{MinSize}},
		{"random MinSize+1", prngBytes(t, 1, MinSize+1), []uint32{MinSize + 1}},
		{"zeros MinSize-1", make([]byte, MinSize-1), []uint32{MinSize - 1}},
		{"zeros MinSize", make([]byte, MinSize), []uint32{MinSize}},
		{"zeros MinSize+1", make([]byte, MinSize+1), []uint32{MinSize, 1}},
		{"0xab MaxSize-1", bytes.Repeat([]byte{0xab}, MaxSize-1), []uint32{MaxSize - 1}},
		{"0xab MaxSize", bytes.Repeat([]byte{0xab}, MaxSize), []uint32{MaxSize}},
		{"0xab MaxSize+1", bytes.Repeat([]byte{0xab}, MaxSize+1), []uint32{MaxSize, 1}},
		{"0xab 2*MaxSize+MinSize", bytes.Repeat([]byte{0xab}, 2*MaxSize+MinSize), []uint32{MaxSize, MaxSize, MinSize}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := s.Chunks(bytes.NewReader(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			checkChunks(t, tc.data, cs)
			if got := sizesOf(cs); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("sizes %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSplitZerosMaxSize: exactly MaxSize of zeros is MaxSize/MinSize chunks
// of MinSize, all with the same hash, so zero runs deduplicate to one chunk.
func TestSplitZerosMaxSize(t *testing.T) {
	s := newTestSplitter(t, testPol)
	data := make([]byte, MaxSize)
	cs, err := s.Chunks(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	checkChunks(t, data, cs)
	if len(cs) != MaxSize/MinSize {
		t.Fatalf("%d chunks, want %d", len(cs), MaxSize/MinSize)
	}
	zero := HashOf(make([]byte, MinSize))
	for i, c := range cs {
		if c.Size != MinSize || c.Hash != zero {
			t.Fatalf("chunk %d: size %d hash %v, want %d %v", i, c.Size, c.Hash, MinSize, zero)
		}
	}
}

// TestSplitCover checks the invariants on random data, that fn sees the
// chunk's own bytes, and that read sizes do not move any boundary.
func TestSplitCover(t *testing.T) {
	data := prngBytes(t, 2, 12<<20+12345)
	s := newTestSplitter(t, testPol)
	var got []Chunk
	var joined bytes.Buffer
	err := s.Split(bytes.NewReader(data), func(c Chunk, b []byte) error {
		if int(c.Size) != len(b) || HashOf(b) != c.Hash {
			return fmt.Errorf("chunk at %d: fn got %d bytes for size %d", c.Offset, len(b), c.Size)
		}
		got = append(got, c)
		joined.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkChunks(t, data, got)
	if !bytes.Equal(joined.Bytes(), data) {
		t.Fatal("the chunks' bytes do not join to the stream")
	}
	if len(got) < 12<<20/MaxSize {
		t.Fatalf("only %d chunks for 12 MiB", len(got))
	}
	for _, tc := range []struct {
		name string
		r    io.Reader
	}{
		{"half reads", iotest.HalfReader(bytes.NewReader(data))},
		{"data with EOF", iotest.DataErrReader(bytes.NewReader(data))},
		{"generated", newPRNGStream(2, 0, int64(len(data)))},
	} {
		cs, err := s.Chunks(tc.r)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fmt.Sprint(cs) != fmt.Sprint(got) {
			t.Fatalf("%s: chunks differ from a whole-buffer read", tc.name)
		}
	}
}

func TestSplitDeterministic(t *testing.T) {
	data := prngBytes(t, 3, 16<<20)
	a := newTestSplitter(t, testPol)
	b := newTestSplitter(t, testPol)
	first, err := a.Chunks(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// Another stream through a in between: reused buffers must not leak
	// state into the next stream.
	if _, err := a.Chunks(bytes.NewReader(prngBytes(t, 4, 5<<20))); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Splitter{"same splitter": a, "new splitter": b} {
		again, err := s.Chunks(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("%s: chunks differ for the same data and polynomial", name)
		}
	}
}

func TestSplitPolynomialsDiffer(t *testing.T) {
	data := prngBytes(t, 5, 16<<20)
	cutsOf := func(pol chunker.Pol) map[int64]bool {
		cs, err := newTestSplitter(t, pol).Chunks(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		checkChunks(t, data, cs)
		m := make(map[int64]bool, len(cs))
		for _, c := range cs[1:] {
			m[c.Offset] = true
		}
		return m
	}
	a, b := cutsOf(testPol), cutsOf(otherPol(t))
	shared := 0
	for off := range a {
		if b[off] {
			shared++
		}
	}
	t.Logf("boundaries: %d and %d, shared %d", len(a), len(b), shared)
	// A boundary shared by chance needs both fingerprints to match at the
	// same byte: expect about none, allow a few.
	if shared > len(a)/10 {
		t.Fatalf("%d of %d boundaries shared between two polynomials", shared, len(a))
	}
}

var errRead = errors.New("disk on fire")

// failingReader returns n bytes of data, then err.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func TestSplitReadError(t *testing.T) {
	s := newTestSplitter(t, testPol)
	data := prngBytes(t, 6, 8<<20)
	want, err := s.Chunks(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		r    io.Reader
		is   error
	}{
		{"at once", iotest.ErrReader(errRead), errRead},
		{"after 1 byte", &failingReader{bytes.NewReader(data[:1]), errRead}, errRead},
		{"after 5 MiB", &failingReader{bytes.NewReader(data[:5<<20]), errRead}, errRead},
		{"timeout", iotest.TimeoutReader(bytes.NewReader(data)), iotest.ErrTimeout},
		// A wrapped EOF is an error, not an end: treating it as the end would
		// drop the chunk in progress without a word.
		{"wrapped EOF", &failingReader{bytes.NewReader(data[:5<<20]), fmt.Errorf("unpack: %w", io.EOF)}, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen int64
			err := s.Split(tc.r, func(c Chunk, _ []byte) error {
				seen = c.Offset + int64(c.Size)
				return nil
			})
			if !errors.Is(err, tc.is) {
				t.Fatalf("Split = %v, want %v", err, tc.is)
			}
			if seen > 5<<20 {
				t.Fatalf("chunks reported up to %d, past the failing read", seen)
			}
			// The splitter stays usable after an error.
			again, err := s.Chunks(bytes.NewReader(data))
			if err != nil || fmt.Sprint(again) != fmt.Sprint(want) {
				t.Fatalf("after a read error, chunks differ (err %v)", err)
			}
		})
	}
}

func TestSplitCallbackError(t *testing.T) {
	s := newTestSplitter(t, testPol)
	data := prngBytes(t, 7, 8<<20)
	errStop := errors.New("stop here")
	for _, stopAt := range []int{1, 2, 5} {
		calls := 0
		err := s.Split(bytes.NewReader(data), func(Chunk, []byte) error {
			calls++
			if calls == stopAt {
				return fmt.Errorf("store full: %w", errStop)
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			t.Fatalf("stop at %d: Split = %v, want errStop", stopAt, err)
		}
		if calls != stopAt {
			t.Fatalf("stop at %d: fn called %d times", stopAt, calls)
		}
	}
	// Chunks reports errors from the reader too.
	if cs, err := s.Chunks(iotest.ErrReader(errRead)); !errors.Is(err, errRead) || cs != nil {
		t.Fatalf("Chunks = %v, %v; want nil, errRead", cs, err)
	}
}

func TestHashString(t *testing.T) {
	var h Hash
	h[0], h[31] = 0xab, 0x01
	s := h.String()
	if len(s) != 2*HashSize || s[:2] != "ab" || s[62:] != "01" {
		t.Fatalf("String() = %q", s)
	}
}
