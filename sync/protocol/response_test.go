package protocol

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
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
