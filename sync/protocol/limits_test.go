package protocol

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Memory bounds the tests hold decoding to: generous (the largest message
// a legitimate peer sends decodes to about 80 MiB), but far below what an
// unbounded decoder spends on a frame of tiny records (an empty FileInfo
// is 2 bytes on the wire and about 180 in memory).
const (
	maxDecodedHeap  = 256 << 20 // HeapInuse held by one decoded message
	maxDecodedAlloc = 512 << 20 // bytes allocated while reading one frame
)

// repeated appends n copies of elem as field num: the wire form of a
// repeated message field.
func repeated(dst []byte, num protowire.Number, elem []byte, n int) []byte {
	for range n {
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		dst = protowire.AppendBytes(dst, elem)
	}
	return dst
}

// filesBody is the body of an Index or IndexUpdate of folder "f" with n
// copies of the encoded FileInfo file.
func filesBody(file []byte, n int) []byte {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, "f")
	return repeated(b, filesField, file, n)
}

// minimalFile is the smallest record a peer's engine would take: a
// one-letter name, one counter, a sequence.
func minimalFile(t testing.TB) []byte {
	t.Helper()
	b, err := proto.Marshal(&FileInfo{Name: "a", Version: &Vector{Counters: []*Counter{{Value: 1}}}, Sequence: 1})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// counterFile is the body of an Index holding one FileInfo whose version
// has n empty counters: 2 + n elements in 2n bytes.
func counterFile(n int) []byte {
	vec := repeated(nil, 1, nil, n)
	file := protowire.AppendTag(nil, 8, protowire.BytesType)
	file = protowire.AppendBytes(file, vec)
	return filesBody(file, 1)
}

// packed returns the compressed frame of body as a frame of type typ.
func packed(typ MessageType, body []byte) []byte {
	return rawFrame(typ, flagCompressed, zstdEncoder().EncodeAll(body, nil))
}

// TestIndexFileLimit: an Index or IndexUpdate of MaxIndexFiles files is
// taken, one of MaxIndexFiles+1 is malformed; a connection that gets one
// ends, and the model never sees it.
func TestIndexFileLimit(t *testing.T) {
	empty := []byte{}
	for _, typ := range []MessageType{MessageType_MESSAGE_TYPE_INDEX, MessageType_MESSAGE_TYPE_INDEX_UPDATE} {
		for _, tc := range []struct {
			n  int
			ok bool
		}{{MaxIndexFiles - 1, true}, {MaxIndexFiles, true}, {MaxIndexFiles + 1, false}} {
			msg, err := ReadMessage(bytes.NewReader(packed(typ, filesBody(empty, tc.n))))
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v of %d files: %v", typ.name(), tc.n, err)
			}
			if err != nil {
				continue
			}
			var files []*FileInfo
			switch m := msg.(type) {
			case *Index:
				files = m.GetFiles()
			case *IndexUpdate:
				files = m.GetFiles()
			}
			if len(files) != tc.n {
				t.Fatalf("%v of %d files read as %d", typ.name(), tc.n, len(files))
			}
		}
	}
	m := newRecordingModel()
	if err := serveFrame(t, m, packed(MessageType_MESSAGE_TYPE_INDEX, filesBody(empty, MaxIndexFiles+1))); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Serve after an index of %d files: %v, want ErrMalformed", MaxIndexFiles+1, err)
	}
	if len(m.messages) != 0 {
		t.Fatal("the model got an index over the limit")
	}
}

// TestElementLimit: a frame whose body holds MaxElements messages and
// repeated elements (nested ones included) is taken, one more is
// malformed: many records are not the only way to many objects.
func TestElementLimit(t *testing.T) {
	for _, tc := range []struct {
		n  int // elements
		ok bool
	}{{MaxElements, true}, {MaxElements + 1, false}} {
		_, err := ReadMessage(bytes.NewReader(packed(MessageType_MESSAGE_TYPE_INDEX, counterFile(tc.n-2))))
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("index of %d elements: %v", tc.n, err)
		}
	}
	// Other frames, which carry no file lists, take fewer.
	for _, tc := range []struct {
		n  int
		ok bool
	}{{MaxOtherElements, true}, {MaxOtherElements + 1, false}} {
		body := repeated(nil, 1, nil, tc.n) // empty folders
		_, err := ReadMessage(bytes.NewReader(rawFrame(MessageType_MESSAGE_TYPE_CLUSTER_CONFIG, 0, body)))
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("cluster config of %d folders: %v", tc.n, err)
		}
	}
}

// TestSealedRecordLimit: a SealedIndex of MaxSealedRecords records is
// taken, one more is malformed.
func TestSealedRecordLimit(t *testing.T) {
	rec, err := proto.Marshal(&SealedRecord{Origin: testHash(1), FileKey: testHash(2), Counter: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n  int
		ok bool
	}{{MaxSealedRecords, true}, {MaxSealedRecords + 1, false}} {
		body := repeated(nil, 2, rec, tc.n)
		msg, err := ReadMessage(bytes.NewReader(packed(MessageType_MESSAGE_TYPE_SEALED_INDEX, body)))
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("sealed index of %d records: %v", tc.n, err)
		}
		if err == nil && len(msg.(*SealedIndex).GetRecords()) != tc.n {
			t.Fatalf("sealed index of %d records read as %d", tc.n, len(msg.(*SealedIndex).GetRecords()))
		}
	}
}

// TestSendRespectsLimits: nothing over a limit is sent, and BatchFiles
// never makes a batch over one, however many bytes it may fill.
func TestSendRespectsLimits(t *testing.T) {
	files := make([]*FileInfo, 2*MaxIndexFiles+3)
	one := &FileInfo{Name: "a"}
	for i := range files {
		files[i] = one
	}
	var buf bytes.Buffer
	if err := WriteMessage(&buf, &Index{Folder: "f", Files: files[:MaxIndexFiles+1]}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("writing an index of %d files: %v, want ErrMalformed", MaxIndexFiles+1, err)
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes written of a refused index", buf.Len())
	}
	batches := BatchFiles(files, MaxFrameSize)
	if len(batches) != 3 || len(batches[0]) != MaxIndexFiles || len(batches[1]) != MaxIndexFiles || len(batches[2]) != 3 {
		lens := make([]int, len(batches))
		for i, b := range batches {
			lens[i] = len(b)
		}
		t.Fatalf("batches of %v files, want %d, %d, 3", lens, MaxIndexFiles, MaxIndexFiles)
	}
	for _, b := range batches {
		if err := WriteMessage(io.Discard, &IndexUpdate{Folder: "f", Files: b}); err != nil {
			t.Fatalf("writing a batch of %d files: %v", len(b), err)
		}
	}

	// Elements: files of MaxElements/4 counters each (sharing one counter
	// to spare the test's memory) go three to a batch.
	counters := make([]*Counter, MaxElements/4)
	c := &Counter{Id: 1, Value: 1}
	for i := range counters {
		counters[i] = c
	}
	big := &FileInfo{Name: "a", Version: &Vector{Counters: counters}}
	heavy := []*FileInfo{big, big, big, big}
	if err := WriteMessage(io.Discard, &Index{Folder: "f", Files: heavy}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("writing an index of %d elements: %v, want ErrMalformed", 4*(len(counters)+2), err)
	}
	batches = BatchFiles(heavy, MaxFrameSize)
	if len(batches) != 2 || len(batches[0]) != 3 || len(batches[1]) != 1 {
		t.Fatalf("%d batches (first of %d files), want 3 files and 1", len(batches), len(batches[0]))
	}
	if err := WriteMessage(io.Discard, &Index{Folder: "f", Files: batches[0]}); err != nil {
		t.Fatalf("writing a batch of %d files: %v", len(batches[0]), err)
	}
}

// memUse reports what reading one frame cost: the heap the message it
// returns holds, and the bytes allocated meanwhile.
func memUse(t *testing.T, frame []byte) (msg proto.Message, err error, inuse, alloc uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msg, err = ReadMessage(bytes.NewReader(frame))
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(msg)
	if after.HeapInuse > before.HeapInuse {
		inuse = after.HeapInuse - before.HeapInuse
	}
	return msg, err, inuse, after.TotalAlloc - before.TotalAlloc
}

// TestDecodingMemoryBounded: the largest messages a peer may send decode
// within a bounded heap, and a frame of tiny records (16 MiB of them, a
// few kilobytes compressed) is refused before it costs its weight in
// objects.
func TestDecodingMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes messages of hundreds of megabytes")
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"most files, each minimal", packed(MessageType_MESSAGE_TYPE_INDEX, filesBody(minimalFile(t), MaxIndexFiles)), true},
		{"most elements", packed(MessageType_MESSAGE_TYPE_INDEX_UPDATE, counterFile(MaxElements-2)), true},
		{"most inline chunks, each empty (refused once decoded)", packed(MessageType_MESSAGE_TYPE_SEALED_INDEX, repeated(nil, 3, nil, MaxElements)), false},
		{"most folders", packed(MessageType_MESSAGE_TYPE_CLUSTER_CONFIG, repeated(nil, 1, nil, MaxOtherElements)), true},
		{"16 MiB of empty folders", packed(MessageType_MESSAGE_TYPE_CLUSTER_CONFIG, repeated(nil, 1, nil, 8<<20)), false},
		{"16 MiB of empty files", packed(MessageType_MESSAGE_TYPE_INDEX, filesBody(nil, 8<<20)), false},
		{"16 MiB of empty counters", packed(MessageType_MESSAGE_TYPE_INDEX, counterFile(8<<20)), false},
		{"16 MiB of empty sealed records", packed(MessageType_MESSAGE_TYPE_SEALED_INDEX, repeated(nil, 2, nil, 8<<20)), false},
		{"16 MiB of empty claims", packed(MessageType_MESSAGE_TYPE_RECEIVER_CLAIMS, repeated(nil, 1, nil, 8<<20)), false},
	} {
		msg, err, inuse, alloc := memUse(t, tc.frame)
		t.Logf("%s: heap %d MiB held, %d MiB allocated", tc.name, inuse>>20, alloc>>20)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if inuse > maxDecodedHeap || alloc > maxDecodedAlloc {
			t.Errorf("%s: decoding held %d MiB and allocated %d MiB, limits %d and %d", tc.name, inuse>>20, alloc>>20, maxDecodedHeap>>20, maxDecodedAlloc>>20)
		}
		runtime.KeepAlive(msg)
	}
}

// heapModel drops what it is handed, noting the largest heap in use while
// a message is held.
type heapModel struct {
	mu      sync.Mutex
	indexes int
	maxHeap uint64
}

func (m *heapModel) note() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.indexes++
	m.maxHeap = max(m.maxHeap, ms.HeapInuse)
}

func (m *heapModel) ClusterConfig(DeviceID, *ClusterConfig) error { return nil }
func (m *heapModel) Index(_ DeviceID, idx *Index) error {
	m.note()
	runtime.KeepAlive(idx) // held while the heap is measured
	return nil
}

func (m *heapModel) IndexUpdate(_ DeviceID, idx *IndexUpdate) error {
	m.note()
	runtime.KeepAlive(idx)
	return nil
}

func (m *heapModel) Request(context.Context, DeviceID, *Request) ([]byte, error) {
	return nil, ErrNoSuchFile
}
func (m *heapModel) Closed(DeviceID, error) {}

// TestIndexFloodHeapBounded: a peer that sends index message after index
// message, each as large as allowed, keeps the heap within one message's
// bound; its first message over a limit ends the connection.
func TestIndexFloodHeapBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends hundreds of megabytes of records")
	}
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)

	ca, cb := net.Pipe()
	defer cb.Close()
	go io.Copy(io.Discard, cb)
	m := &heapModel{}
	c := NewConn(DeviceID{'f'}, ca, m, Options{})
	errc := make(chan error, 1)
	go func() { errc <- c.Serve(context.Background()) }()

	const floods = 10
	full := packed(MessageType_MESSAGE_TYPE_INDEX_UPDATE, filesBody(minimalFile(t), MaxIndexFiles))
	for i := range floods {
		if _, err := cb.Write(full); err != nil {
			t.Fatalf("sending index %d: %v", i, err)
		}
	}
	hostile := packed(MessageType_MESSAGE_TYPE_INDEX_UPDATE, filesBody(nil, 8<<20))
	go cb.Write(hostile) // fails once the connection ends
	select {
	case err := <-errc:
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("Serve: %v, want ErrMalformed", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Serve did not end")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Logf("%d indexes taken, heap at most %d MiB above the start", m.indexes, (m.maxHeap-min(m.maxHeap, base.HeapInuse))>>20)
	if m.indexes != floods {
		t.Fatalf("the model took %d indexes, want %d", m.indexes, floods)
	}
	if m.maxHeap > base.HeapInuse+maxDecodedHeap {
		t.Fatalf("heap reached %d MiB above the start, limit %d", (m.maxHeap-base.HeapInuse)>>20, maxDecodedHeap>>20)
	}
}
