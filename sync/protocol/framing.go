package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"
)

const (
	// MaxFrameSize is the largest frame length L (type and flags bytes
	// plus body) a frame may declare, and the largest size a compressed
	// body may decompress to.
	MaxFrameSize = 64 << 20

	// MaxRequestSize is the largest Request.size a peer may ask for: the
	// answer must fit in one frame.
	MaxRequestSize = MaxFrameSize - 1<<10

	// headerSize is the length prefix plus the type and flags bytes.
	headerSize = 6

	// flagCompressed marks a zstd-compressed body.
	flagCompressed = 1 << 0

	// compressMin is the smallest body worth trying to compress.
	compressMin = 128

	// bodyStep is how much of a frame body is allocated before its bytes
	// arrive: a peer that declares a large frame must send it to make us
	// hold it.
	bodyStep = 1 << 20
)

// zstd coders are shared: EncodeAll and DecodeAll are safe for concurrent
// use and start no goroutines. The encoder's window is 1 MiB and its
// history kept small: with the defaults, encoding a 2.3 MB index kept
// 18 MB for good, for the same size out (3.3 MB so, and no slower).
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(fmt.Sprintf("protocol: zstd encoder options: %v", err))
		}
		return enc
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxFrameSize))
		if err != nil {
			panic(fmt.Sprintf("protocol: zstd decoder options: %v", err))
		}
		return dec
	})
)

// WriteMessage writes msg to w as one frame, in a single Write call.
// Index and IndexUpdate bodies over 128 bytes are zstd-compressed when that
// makes them smaller. It returns ErrUnknownMessage for a message that is
// not a frame type, and, before writing anything, ErrMalformed for one that
// breaks a rule the receiver checks and ErrFrameTooLarge for one that does
// not fit in a frame.
func WriteMessage(w io.Writer, msg proto.Message) error {
	frame, err := encodeFrame(msg)
	if err != nil {
		return err
	}
	_, err = w.Write(frame)
	putBuf(frame)
	if err != nil {
		return fmt.Errorf("writing frame: %w", err)
	}
	return nil
}

// ReadMessage reads one frame from r and returns the message it holds: a
// *Hello, *ClusterConfig, *Index, *IndexUpdate, *Request, *Response, *Ping,
// *Close, *SealedIndex, *SealedAck or *ReceiverClaims. At a clean end of stream before a frame it returns io.EOF; a
// stream that ends inside a frame gives io.ErrUnexpectedEOF. A frame that
// breaks the specification gives an error wrapping ErrMalformed. ReadMessage
// allocates memory for a frame body only as its bytes arrive.
func ReadMessage(r io.Reader) (proto.Message, error) {
	return readMessage(r, MaxFrameSize)
}

// readMessage is ReadMessage with a smaller frame size limit maxLen.
func readMessage(r io.Reader, maxLen int) (proto.Message, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("reading frame header: %w", err)
	}
	length := binary.BigEndian.Uint32(hdr[:4])
	typ, flags := MessageType(hdr[4]), hdr[5]
	if length < 2 {
		return nil, fmt.Errorf("%w: frame length %d is below 2", ErrMalformed, length)
	}
	if uint64(length) > uint64(maxLen) {
		return nil, fmt.Errorf("%w: frame length %d exceeds %d", ErrMalformed, length, maxLen)
	}
	msg := newMessage(typ)
	if msg == nil {
		return nil, fmt.Errorf("%w: unknown message type %d", ErrMalformed, typ)
	}
	if flags&^flagCompressed != 0 {
		return nil, fmt.Errorf("%w: unknown frame flags %#02x", ErrMalformed, flags)
	}
	if typ == MessageType_MESSAGE_TYPE_RESPONSE && flags == 0 && int(length)-2 >= streamResponseMin {
		resp, err := readResponse(r, int(length)-2)
		if err != nil {
			return nil, fmt.Errorf("reading %v body: %w", typ.name(), err)
		}
		return resp, nil
	}
	body, err := readBody(r, int(length)-2)
	if err != nil {
		return nil, fmt.Errorf("reading %v body: %w", typ.name(), err)
	}
	if flags&flagCompressed != 0 {
		packed := body
		body, err = zstdDecoder().DecodeAll(packed, nil)
		putBuf(packed)
		if err != nil {
			return nil, fmt.Errorf("%w: decompressing %v body: %w", ErrMalformed, typ.name(), err)
		}
	}
	// Counted before decoding: decoded, a body of tiny records costs many
	// times its size.
	if err := checkElements(typ, msg, body); err != nil {
		putBuf(body)
		return nil, fmt.Errorf("%w: %v: %w", ErrMalformed, typ.name(), err)
	}
	// Unmarshal copies what it keeps, so the body can be recycled.
	err = proto.Unmarshal(body, msg)
	putBuf(body)
	if err != nil {
		return nil, fmt.Errorf("%w: decoding %v body: %w", ErrMalformed, typ.name(), err)
	}
	if err := validate(msg); err != nil {
		return nil, fmt.Errorf("%w: %v: %w", ErrMalformed, typ.name(), err)
	}
	return msg, nil
}

// readBody reads exactly n bytes, growing its buffer as they arrive. An
// early end of stream is io.ErrUnexpectedEOF. The buffer may be recycled
// with putBuf.
func readBody(r io.Reader, n int) ([]byte, error) {
	buf := getBuf(min(n, bodyStep))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(grown, buf)
			putBuf(buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			putBuf(buf)
			return nil, err
		}
	}
	return buf, nil
}

// encodeFrame returns msg's frame in a buffer from getBuf.
func encodeFrame(msg proto.Message) ([]byte, error) {
	if typeOf(msg) == MessageType_MESSAGE_TYPE_UNSPECIFIED {
		return nil, fmt.Errorf("%w: %T", ErrUnknownMessage, msg)
	}
	buf := getBuf(headerSize + proto.Size(msg))
	frame, err := appendFrame(buf, msg)
	if err != nil {
		putBuf(buf)
		return nil, err
	}
	return frame, nil
}

// appendFrame appends msg's frame to dst.
func appendFrame(dst []byte, msg proto.Message) ([]byte, error) {
	typ := typeOf(msg)
	if typ == MessageType_MESSAGE_TYPE_UNSPECIFIED {
		return dst, fmt.Errorf("%w: %T", ErrUnknownMessage, msg)
	}
	if err := validate(msg); err != nil {
		return dst, fmt.Errorf("%w: %v: %w", ErrMalformed, typ.name(), err)
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(typ), 0)
	bodyStart := len(dst)
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, msg)
	if err != nil {
		return dst[:start], fmt.Errorf("encoding %v: %w", typ.name(), err)
	}
	if err := checkElements(typ, msg, dst[bodyStart:]); err != nil {
		return dst[:start], fmt.Errorf("%w: %v: %w", ErrMalformed, typ.name(), err)
	}
	if compressible(typ) && len(dst)-bodyStart > compressMin {
		body := dst[bodyStart:]
		packed := zstdEncoder().EncodeAll(body, getBuf(len(body)))
		if len(packed) < len(body) {
			dst = append(dst[:bodyStart], packed...)
			dst[bodyStart-1] = flagCompressed
		}
		putBuf(packed)
	}
	length := len(dst) - start - 4
	if length > MaxFrameSize {
		return dst[:start], fmt.Errorf("%w: %v frame of %d bytes, limit %d", ErrFrameTooLarge, typ.name(), length, MaxFrameSize)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(length))
	return dst, nil
}

// name names a frame type for errors: "index update", "type 200".
func (t MessageType) name() string {
	if _, ok := MessageType_name[int32(t)]; !ok || t == MessageType_MESSAGE_TYPE_UNSPECIFIED {
		return fmt.Sprintf("type %d", int32(t))
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(t.String(), "MESSAGE_TYPE_")), "_", " ")
}

// compressible reports whether bodies of frames of type typ are worth
// compressing.
func compressible(typ MessageType) bool {
	return typ == MessageType_MESSAGE_TYPE_INDEX || typ == MessageType_MESSAGE_TYPE_INDEX_UPDATE
}

// typeOf returns the frame type of msg, or MESSAGE_TYPE_UNSPECIFIED if
// msg is not a frame message.
func typeOf(msg proto.Message) MessageType {
	switch msg.(type) {
	case *Hello:
		return MessageType_MESSAGE_TYPE_HELLO
	case *ClusterConfig:
		return MessageType_MESSAGE_TYPE_CLUSTER_CONFIG
	case *Index:
		return MessageType_MESSAGE_TYPE_INDEX
	case *IndexUpdate:
		return MessageType_MESSAGE_TYPE_INDEX_UPDATE
	case *Request:
		return MessageType_MESSAGE_TYPE_REQUEST
	case *Response:
		return MessageType_MESSAGE_TYPE_RESPONSE
	case *Ping:
		return MessageType_MESSAGE_TYPE_PING
	case *Close:
		return MessageType_MESSAGE_TYPE_CLOSE
	case *SealedIndex:
		return MessageType_MESSAGE_TYPE_SEALED_INDEX
	case *SealedAck:
		return MessageType_MESSAGE_TYPE_SEALED_ACK
	case *ReceiverClaims:
		return MessageType_MESSAGE_TYPE_RECEIVER_CLAIMS
	default:
		return MessageType_MESSAGE_TYPE_UNSPECIFIED
	}
}

// newMessage returns an empty message of frame type typ, or nil if typ is
// not a known frame type.
func newMessage(typ MessageType) proto.Message {
	switch typ {
	case MessageType_MESSAGE_TYPE_HELLO:
		return new(Hello)
	case MessageType_MESSAGE_TYPE_CLUSTER_CONFIG:
		return new(ClusterConfig)
	case MessageType_MESSAGE_TYPE_INDEX:
		return new(Index)
	case MessageType_MESSAGE_TYPE_INDEX_UPDATE:
		return new(IndexUpdate)
	case MessageType_MESSAGE_TYPE_REQUEST:
		return new(Request)
	case MessageType_MESSAGE_TYPE_RESPONSE:
		return new(Response)
	case MessageType_MESSAGE_TYPE_PING:
		return new(Ping)
	case MessageType_MESSAGE_TYPE_CLOSE:
		return new(Close)
	case MessageType_MESSAGE_TYPE_SEALED_INDEX:
		return new(SealedIndex)
	case MessageType_MESSAGE_TYPE_SEALED_ACK:
		return new(SealedAck)
	case MessageType_MESSAGE_TYPE_RECEIVER_CLAIMS:
		return new(ReceiverClaims)
	default:
		return nil
	}
}
