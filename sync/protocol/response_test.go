package protocol

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"lockstep/test/testutil"
)

// frameOf wraps a raw Response body in a frame.
func frameOf(body []byte) []byte {
	return rawFrame(MessageType_MESSAGE_TYPE_RESPONSE, 0, body)
}

func TestStreamedResponses(t *testing.T) {
	for _, c := range []struct {
		name string
		resp *Response
	}{
		{"below the streaming size", &Response{Id: 7, Data: bytes.Repeat([]byte{1}, streamResponseMin-20)}},
		{"at it", &Response{Id: 7, Data: bytes.Repeat([]byte{2}, streamResponseMin)}},
		{"above it", &Response{Id: 1 << 40, Data: bytes.Repeat([]byte{3}, streamResponseMin+1), Code: ErrorCode_ERROR_CODE_GENERIC}},
		{"no id", &Response{Data: bytes.Repeat([]byte{4}, 300<<10)}},
		{"a chunk", &Response{Id: 99, Data: bytes.Repeat([]byte{5}, 4<<20)}},
	} {
		frame, err := appendFrame(nil, c.resp)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := ReadMessage(bytes.NewReader(frame))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !proto.Equal(msg, c.resp) {
			t.Fatalf("%s: read back differs", c.name)
		}
		Recycle(msg.(*Response).Data)
	}
}

func TestResponseOtherLayouts(t *testing.T) {
	data := bytes.Repeat([]byte{9}, 100<<10)
	var b []byte
	// Code first, then data, then id: valid protobuf in another order.
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(ErrorCode_ERROR_CODE_NO_SUCH_FILE))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, data)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 5)
	msg, err := ReadMessage(bytes.NewReader(frameOf(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := &Response{Id: 5, Data: data, Code: ErrorCode_ERROR_CODE_NO_SUCH_FILE}
	if !proto.Equal(msg, want) {
		t.Fatal("reordered fields read back wrong")
	}
	// Data, then an unknown field and the code.
	b = protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 6)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, data)
	b = protowire.AppendTag(b, 15, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("future"))
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	msg, err = ReadMessage(bytes.NewReader(frameOf(b)))
	if err != nil {
		t.Fatal(err)
	}
	if r := msg.(*Response); r.Id != 6 || !bytes.Equal(r.Data, data) || r.Code != ErrorCode_ERROR_CODE_GENERIC {
		t.Fatalf("with an unknown field: %v %d %v", r.Id, len(r.Data), r.Code)
	}
}

func TestResponseMalformed(t *testing.T) {
	data := bytes.Repeat([]byte{9}, 100<<10)
	full, err := appendFrame(nil, &Response{Id: 3, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	// Cut short in the data and in the prefix.
	for _, n := range []int{len(full) - 1, headerSize + 10} {
		if _, err := ReadMessage(bytes.NewReader(full[:n])); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("truncated to %d: %v", n, err)
		}
	}
	// A data length beyond the body.
	b := protowire.AppendTag(nil, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, 1<<30)
	b = append(b, data...)
	if _, err := ReadMessage(bytes.NewReader(frameOf(b))); !errors.Is(err, ErrMalformed) {
		t.Errorf("data longer than the body: %v", err)
	}
	// Two data fields.
	b = protowire.AppendTag(nil, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, data)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("x"))
	if _, err := ReadMessage(bytes.NewReader(frameOf(b))); !errors.Is(err, ErrMalformed) {
		t.Errorf("two data fields: %v", err)
	}
	// Garbage after the data.
	b = protowire.AppendTag(nil, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, data)
	b = append(b, 0xff, 0xff)
	if _, err := ReadMessage(bytes.NewReader(frameOf(b))); !errors.Is(err, ErrMalformed) {
		t.Errorf("garbage after the data: %v", err)
	}
}

// TestResponseHead checks that a head followed by the data is exactly the
// frame appendFrame makes of the whole Response.
func TestResponseHead(t *testing.T) {
	for _, id := range []int64{0, 1, 300, 1 << 40, -1} {
		for _, size := range []int{streamResponseMin, 384 << 10, 4 << 20} {
			data := bytes.Repeat([]byte{byte(size)}, size)
			want, err := appendFrame(nil, &Response{Id: id, Data: data})
			if err != nil {
				t.Fatal(err)
			}
			head, err := responseHead(id, size)
			if err != nil {
				t.Fatal(err)
			}
			if got := append(head, data...); !bytes.Equal(got, want) {
				t.Errorf("id %d, %d bytes: head and data differ from the marshalled frame", id, size)
			}
		}
	}
	if _, err := responseHead(1, MaxFrameSize); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("responseHead over the frame limit: %v", err)
	}
}

// releasingModel answers requests from buffers of its own, each filled
// with the request's offset as a byte, and scribbles over each once it is
// released, as a pool reusing it would.
type releasingModel struct {
	*recordingModel
	mu       sync.Mutex
	answered []*byte
	released map[*byte]int
}

func newReleasingModel() *releasingModel {
	m := &releasingModel{recordingModel: newRecordingModel(), released: map[*byte]int{}}
	m.answer = func(_ context.Context, req *Request) ([]byte, error) {
		data := bytes.Repeat([]byte{byte(req.GetOffset())}, int(req.GetSize()))
		m.mu.Lock()
		m.answered = append(m.answered, unsafe.SliceData(data))
		m.mu.Unlock()
		return data, nil
	}
	return m
}

// counts returns how many answers were made and how many released.
func (m *releasingModel) counts() (answered, released int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.answered), len(m.released)
}

// releasedOnce fails t for every answer not released exactly once.
func (m *releasingModel) releasedOnce(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, p := range m.answered {
		if m.released[p] != 1 {
			t.Errorf("answer %d was released %d times, want once", i, m.released[p])
		}
	}
}

func (m *releasingModel) Release(data []byte) {
	for i := range data {
		data[i] = 0xff
	}
	m.mu.Lock()
	m.released[unsafe.SliceData(data)]++
	m.mu.Unlock()
}

// TestConnLargeResponseReleasedAfterWrite serves large answers that the
// writer sends from the model's buffers: each arrives intact, so none was
// handed back before it was written, and each is released exactly once.
func TestConnLargeResponseReleasedAfterWrite(t *testing.T) {
	ca, cb := net.Pipe()
	a := serve(t, DeviceID{'b'}, ca, newRecordingModel(), Options{})
	m := newReleasingModel()
	ctx, cancel := context.WithCancel(context.Background())
	b := &served{conn: NewConn(DeviceID{'a'}, cb, m, Options{}), model: m.recordingModel, cancel: cancel, errc: make(chan error, 1)}
	go func() { b.errc <- b.conn.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		b.wait(t)
	})

	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			size := streamResponseMin + i*7919
			data, err := a.conn.Request(context.Background(), &Request{Name: "f", Offset: int64(i), Size: uint32(size)})
			if err != nil {
				t.Error(err)
				return
			}
			if len(data) != size || bytes.Count(data, []byte{byte(i)}) != size {
				t.Errorf("request %d: the answer arrived changed", i)
			}
		})
	}
	wg.Wait()
	// The last release may come just after its answer arrived.
	testutil.Eventually(t, 5*time.Second, "every answered buffer to be released", func() bool {
		answered, released := m.counts()
		return released == answered
	})
	m.releasedOnce(t)
}

// TestConnEndReleasesUnsent: answers still queued, or being written, when
// the connection ends are released all the same, each once: memory a
// model lends for an answer is only freed by its release.
func TestConnEndReleasesUnsent(t *testing.T) {
	ca, cb := net.Pipe()
	m := newReleasingModel()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{conn: NewConn(DeviceID{'r'}, ca, m, Options{}), model: m.recordingModel, cancel: cancel, errc: make(chan error, 1)}
	go func() { s.errc <- s.conn.Serve(ctx) }()
	// The peer asks, and never reads an answer: the first blocks the
	// writer, the others queue behind it.
	const asked = 20
	for i := range asked {
		size := streamResponseMin
		if i%2 == 1 {
			size = 128 << 10 // past bufio
		}
		if err := WriteMessage(cb, &Request{Id: int64(i + 1), Name: "f", Size: uint32(size)}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 5*time.Second, "every request answered", func() bool {
		answered, _ := m.counts()
		return answered == asked
	})
	cancel()
	s.wait(t)
	cb.Close()
	m.releasedOnce(t)
}

// TestLendRecycle: recycling lent data gives it back to its owner, once,
// rather than pooling it; data no one lent goes to the pool.
func TestLendRecycle(t *testing.T) {
	whole := make([]byte, 8<<10)
	part := whole[1024:3072:3072]
	gave := 0
	Lend(part, func() { gave++ })
	Recycle(make([]byte, 1024)) // not lent: pooled
	if gave != 0 {
		t.Fatal("recycling data that was not lent gave back lent data")
	}
	Recycle(part)
	if gave != 1 {
		t.Fatalf("lent data recycled: given back %d times, want once", gave)
	}
	if _, ok := lent.Load(unsafe.SliceData(part)); ok {
		t.Fatal("lent data still registered after it was given back")
	}
}
