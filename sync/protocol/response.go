package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Large Responses (chunks) are decoded as they are read, with their data
// read straight into a buffer of its own from the pool instead of a frame
// buffer that proto.Unmarshal then copies out of: on machines where fresh
// memory is expensive to fault in, that copy was a large part of a
// transfer's cost. The caller may give the data back with Recycle.

// streamResponseMin is the body size from which Responses are streamed:
// the smallest pooled buffer. Small files' blocks are most of what a
// large folder's first sync fetches; decoded whole, their copies were a
// sixth of a receiving node's allocations at 100,000 files.
const streamResponseMin = minPooledSize

// The sending side saves a copy too: a Response with at least
// streamResponseMin bytes of data is framed without them (responseHead),
// and the writer sends the data straight from the model's buffer after
// its frame's first bytes, releasing the buffer to the model only once it
// is written. Serving 1 GiB of blocks, marshalling each into its frame
// cost ~0.24 s of copying on the dev machine.

// responseHead returns, in a buffer from getBuf, the frame of a successful
// Response to request id carrying size bytes of data, up to where the data
// starts: the frame header, the id and the data's tag and length, laid out
// as readResponse streams it.
func responseHead(id int64, size int) ([]byte, error) {
	buf := getBuf(headerSize + 2*binary.MaxVarintLen64 + 2)
	buf = append(buf, 0, 0, 0, 0, byte(MessageType_MESSAGE_TYPE_RESPONSE), 0)
	if id != 0 {
		buf = protowire.AppendTag(buf, 1, protowire.VarintType)
		buf = protowire.AppendVarint(buf, uint64(id))
	}
	buf = protowire.AppendTag(buf, 2, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(size))
	length := len(buf) - 4 + size
	if length > MaxFrameSize {
		putBuf(buf)
		return nil, fmt.Errorf("%w: response frame of %d bytes, limit %d", ErrFrameTooLarge, length, MaxFrameSize)
	}
	binary.BigEndian.PutUint32(buf, uint32(length))
	return buf, nil
}

// responsePrefix is how much of a Response body is read to find where its
// data starts: the id (tag and up to 10 bytes) and the data's tag and
// length (up to 1 + 5 bytes).
const responsePrefix = 17

// Recycle gives back data that Conn.Request returned, or a buffer from
// Buffer, once the caller no longer uses it (nor any slice of it), so a
// later response can reuse the memory. Calling it is optional; a buffer
// not from the pool is dropped. Data lent with Lend goes back to its
// owner instead.
func Recycle(data []byte) {
	if len(data) > 0 {
		if give, ok := lent.LoadAndDelete(unsafe.SliceData(data)); ok {
			give.(func())()
			return
		}
	}
	putBuf(data)
}

// lent maps the first byte of each slice lent with Lend to the function
// that gives it back.
var lent sync.Map

// Lend marks data, which a model answers a request with and which belongs
// to memory it manages itself (a part of a larger buffer), as lent: the
// Recycle that follows its response calls give rather than pool it. data
// must not be empty, and must be recycled exactly once.
func Lend(data []byte, give func()) {
	lent.Store(unsafe.SliceData(data), give)
}

// Buffer returns an empty buffer with capacity at least n from the pool
// the connections use.
func Buffer(n int) []byte { return getBuf(n) }

// readResponse reads a Response body of n bytes (n >= streamResponseMin).
// A body laid out as this package writes it (id, then data, then code) is
// streamed; any other valid layout is read whole and unmarshalled.
func readResponse(r io.Reader, n int) (*Response, error) {
	var pre [responsePrefix]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, unexpected(err)
	}
	resp := &Response{}
	b := pre[:]
	off := 0
	num, typ, m := protowire.ConsumeTag(b)
	if m > 0 && num == 1 && typ == protowire.VarintType {
		v, k := protowire.ConsumeVarint(b[m:])
		if k < 0 {
			return readResponseWhole(r, pre[:], n)
		}
		resp.Id = int64(v)
		off = m + k
		num, typ, m = protowire.ConsumeTag(b[off:])
	}
	if m <= 0 || num != 2 || typ != protowire.BytesType {
		return readResponseWhole(r, pre[:], n)
	}
	size, k := protowire.ConsumeVarint(b[off+m:])
	if k < 0 || size > uint64(n-(off+m+k)) {
		return readResponseWhole(r, pre[:], n)
	}
	off += m + k
	if int(size) < len(pre)-off {
		// Small data in a large body: not what this is for.
		return readResponseWhole(r, pre[:], n)
	}
	data := getBuf(int(size))[:size]
	got := copy(data, pre[off:])
	if _, err := io.ReadFull(r, data[got:]); err != nil {
		putBuf(data)
		return nil, unexpected(err)
	}
	// Whatever follows the data (the code, unknown fields).
	rest := make([]byte, n-off-int(size))
	if _, err := io.ReadFull(r, rest); err != nil {
		putBuf(data)
		return nil, unexpected(err)
	}
	var tail Response
	if err := proto.Unmarshal(rest, &tail); err != nil {
		putBuf(data)
		return nil, fmt.Errorf("%w: decoding response body: %w", ErrMalformed, err)
	}
	if tail.Id != 0 {
		resp.Id = tail.Id // a later field wins, as in proto
	}
	if len(tail.Data) != 0 {
		putBuf(data)
		return nil, fmt.Errorf("%w: response with two data fields", ErrMalformed)
	}
	resp.Code = tail.Code
	resp.Data = data
	return resp, nil
}

// readResponseWhole reads the rest of a body whose first bytes are pre
// and unmarshals it.
func readResponseWhole(r io.Reader, pre []byte, n int) (*Response, error) {
	body := getBuf(n)[:n]
	copy(body, pre)
	if _, err := io.ReadFull(r, body[len(pre):]); err != nil {
		putBuf(body)
		return nil, unexpected(err)
	}
	resp := &Response{}
	err := proto.Unmarshal(body, resp)
	putBuf(body)
	if err != nil {
		return nil, fmt.Errorf("%w: decoding response body: %w", ErrMalformed, err)
	}
	return resp, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
