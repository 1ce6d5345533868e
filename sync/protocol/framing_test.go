package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// testHash returns a distinct, random-looking 32-byte hash for i.
func testHash(i int) []byte {
	h := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
	return h[:]
}

// testFile returns a realistic FileInfo number i with nblocks chunks.
func testFile(i, nblocks int) *FileInfo {
	f := &FileInfo{
		Name:        fmt.Sprintf("photos/2024/trip-%04d/IMG_%06d.jpg", i/100, i),
		Type:        FileInfoType_FILE_INFO_TYPE_FILE,
		Permissions: 0o644,
		ModifiedNs:  1_700_000_000_000_000_000 + int64(i)*1_000_003,
		Version: &Vector{Counters: []*Counter{
			{Id: 0x1122334455667788, Value: uint64(i + 1)},
			{Id: 0x99aabbccddeeff00, Value: 3},
		}},
		Sequence:   int64(i + 1),
		ModifiedBy: 0x1122334455667788,
	}
	for b := range nblocks {
		f.Blocks = append(f.Blocks, &BlockInfo{Offset: int64(b) * 400 << 10, Size: 400 << 10, Hash: testHash(i*1000 + b)})
		f.Size += 400 << 10
	}
	return f
}

// everyMessage returns one filled-in message of each frame type.
func everyMessage() []proto.Message {
	id := make([]byte, DeviceIDSize)
	id[0] = 7
	return []proto.Message{
		&Hello{DeviceName: "laptop", ClientName: "lockstep", ClientVersion: "v0.1.0", ProtocolVersion: ProtocolVersion},
		&ClusterConfig{Folders: []*Folder{{
			Id: "docs", Label: "Documents", Type: FolderType_FOLDER_TYPE_ENCRYPTED, Paused: true,
			Devices: []*FolderDevice{{DeviceId: id, Name: "nas", Addresses: []string{"tcp://127.0.0.1:22100", "dynamic"},
				MaxSequence: 42, IndexId: 0xfeedface, Encrypted: true}},
		}}},
		&Index{Folder: "docs", Files: []*FileInfo{testFile(1, 3), {Name: "dir", Type: FileInfoType_FILE_INFO_TYPE_DIRECTORY, Deleted: true}}},
		&IndexUpdate{Folder: "docs", Files: []*FileInfo{{Name: "link", Type: FileInfoType_FILE_INFO_TYPE_SYMLINK, SymlinkTarget: "../x", Invalid: true}}},
		&Request{Id: 9, Folder: "docs", Name: "a/b.txt", Offset: 1 << 40, Size: 4 << 20, Hash: testHash(5), FromTemporary: true},
		&Response{Id: 9, Data: []byte("chunk bytes"), Code: ErrorCode_ERROR_CODE_NO_ERROR},
		&Response{Id: 10, Code: ErrorCode_ERROR_CODE_NO_SUCH_FILE},
		&Ping{},
		&Close{Reason: "shutting down"},
		&ReceiverClaims{Claims: []*ReceiverClaim{testClaim(1), testClaim(2)}},
	}
}

// testClaim is a valid receiver claim; i varies its numbers.
func testClaim(i int) *ReceiverClaim {
	return &ReceiverClaim{Folder: "docs", Receiver: bytes.Repeat([]byte{9}, DeviceIDSize), LogId: 0xabc + uint64(i),
		Origin: bytes.Repeat([]byte{byte(i)}, DeviceIDSize), Counter: uint64(10 * i), Sequence: int64(20 * i)}
}

func TestRoundTripEveryMessage(t *testing.T) {
	var stream bytes.Buffer
	msgs := everyMessage()
	for _, m := range msgs {
		if err := WriteMessage(&stream, m); err != nil {
			t.Fatalf("WriteMessage(%T): %v", m, err)
		}
	}
	for _, want := range msgs {
		got, err := ReadMessage(&stream)
		if err != nil {
			t.Fatalf("ReadMessage for %T: %v", want, err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("round trip of %T:\n got %v\nwant %v", want, got, want)
		}
	}
	if _, err := ReadMessage(&stream); err != io.EOF {
		t.Fatalf("ReadMessage at end of stream = %v, want io.EOF", err)
	}
}

func TestWriteMessageUnknownType(t *testing.T) {
	var buf bytes.Buffer
	for _, m := range []proto.Message{&Folder{}, &FileInfo{}, &Vector{}} {
		if err := WriteMessage(&buf, m); !errors.Is(err, ErrUnknownMessage) {
			t.Errorf("WriteMessage(%T) = %v, want ErrUnknownMessage", m, err)
		}
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes written for unsendable messages", buf.Len())
	}
}

func TestIndexCompression(t *testing.T) {
	frameOf := func(m proto.Message) []byte {
		t.Helper()
		var buf bytes.Buffer
		if err := WriteMessage(&buf, m); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	// Many similar names compress well.
	var files []*FileInfo
	for i := range 200 {
		files = append(files, &FileInfo{Name: fmt.Sprintf("src/module/sub/file-%05d.go", i), Permissions: 0o644})
	}
	big := &Index{Folder: "code", Files: files}
	frame := frameOf(big)
	if frame[5] != flagCompressed {
		t.Fatalf("index of %d bytes: flags %#x, want compressed", proto.Size(big), frame[5])
	}
	if len(frame)-headerSize >= proto.Size(big) {
		t.Fatalf("compressed body %d bytes, plain %d", len(frame)-headerSize, proto.Size(big))
	}
	got, err := ReadMessage(bytes.NewReader(frame))
	if err != nil || !proto.Equal(got, big) {
		t.Fatalf("compressed index round trip: err %v, equal %v", err, proto.Equal(got, big))
	}

	// Same size, other types: never compressed.
	if f := frameOf(&Close{Reason: strings.Repeat("a", 4000)}); f[5] != 0 {
		t.Fatalf("close frame flags %#x, want 0", f[5])
	}
	// At the 128-byte threshold: not compressed; just above: compressed.
	for _, tc := range []struct {
		size int
		want byte
	}{{compressMin - 1, 0}, {compressMin, 0}, {compressMin + 1, flagCompressed}} {
		idx := &IndexUpdate{Folder: "f"}
		idx.Folder = strings.Repeat("f", tc.size-2) // tag + length byte + name
		if proto.Size(idx) != tc.size {
			t.Fatalf("test index has %d bytes, want %d", proto.Size(idx), tc.size)
		}
		if f := frameOf(idx); f[5] != tc.want {
			t.Errorf("index update of %d bytes: flags %#x, want %#x", tc.size, f[5], tc.want)
		}
	}
	// Incompressible (random hashes) and over the threshold: sent plain.
	rnd := rand.NewChaCha8([32]byte{1})
	noise := &FileInfo{Name: "x"}
	for range 8 {
		h := make([]byte, HashSize)
		_, _ = rnd.Read(h)
		noise.Blocks = append(noise.Blocks, &BlockInfo{Hash: h})
	}
	plain := &Index{Files: []*FileInfo{noise}}
	if proto.Size(plain) <= compressMin {
		t.Fatalf("random index of %d bytes is under the threshold", proto.Size(plain))
	}
	if f := frameOf(plain); f[5] != 0 || len(f) != headerSize+proto.Size(plain) {
		t.Errorf("incompressible index: flags %#x, frame %d bytes, want plain", f[5], len(f))
	}
}

// closeFrame returns the frame of a Close whose reason has n bytes.
func closeFrame(t *testing.T, n int) []byte {
	t.Helper()
	frame, err := appendFrame(nil, &Close{Reason: strings.Repeat("r", n)})
	if err != nil {
		t.Fatalf("close frame with reason of %d bytes: %v", n, err)
	}
	return frame
}

func TestFrameSizeLimit(t *testing.T) {
	// A Close body is tag (1) + 4-byte length + reason; L adds 2.
	fit := MaxFrameSize - 2 - 1 - 4
	frame := closeFrame(t, fit)
	if l := binary.BigEndian.Uint32(frame); l != MaxFrameSize {
		t.Fatalf("frame length %d, want %d", l, MaxFrameSize)
	}
	msg, err := ReadMessage(bytes.NewReader(frame))
	if err != nil {
		t.Fatalf("reading a frame of exactly MaxFrameSize: %v", err)
	}
	if n := len(msg.(*Close).GetReason()); n != fit {
		t.Fatalf("reason of %d bytes, want %d", n, fit)
	}
	closeFrame(t, fit-1)
	var buf bytes.Buffer
	if err := WriteMessage(&buf, &Close{Reason: strings.Repeat("r", fit+1)}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("writing a frame one byte over the limit: %v, want ErrFrameTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes written for a frame over the limit", buf.Len())
	}

	// Declared lengths: L = MaxFrameSize+1 is refused before any body.
	for _, l := range []uint32{MaxFrameSize + 1, 1 << 31, 0xffffffff} {
		hdr := binary.BigEndian.AppendUint32(nil, l)
		hdr = append(hdr, byte(MessageType_MESSAGE_TYPE_PING), 0)
		if _, err := ReadMessage(bytes.NewReader(hdr)); !errors.Is(err, ErrMalformed) {
			t.Errorf("declared length %d: %v, want ErrMalformed", l, err)
		}
	}
}

func TestReadMessageMalformed(t *testing.T) {
	for name, frame := range malformedFrames(t) {
		t.Run(name, func(t *testing.T) {
			_, err := ReadMessage(bytes.NewReader(frame))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ReadMessage = %v, want ErrMalformed", err)
			}
		})
	}
}

// rawFrame builds a frame around body without any checks.
func rawFrame(typ MessageType, flags byte, body []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(len(body)+2))
	f = append(f, byte(typ), flags)
	return append(f, body...)
}

// zstdStream compresses data with the streaming encoder, which does not
// declare the content size in the frame header.
func zstdStream(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// malformedFrames returns frames that break the specification, by name.
func malformedFrames(t testing.TB) map[string][]byte {
	zeros := make([]byte, MaxFrameSize+1)
	bombDeclared := zstdEncoder().EncodeAll(zeros, nil)
	bombStreamed := zstdStream(t, zeros)
	small, err := proto.Marshal(&Index{Folder: strings.Repeat("docs", 100)})
	if err != nil {
		t.Fatal(err)
	}
	smallPacked := zstdEncoder().EncodeAll(small, nil)
	badIndex, err := proto.Marshal(&Index{Files: []*FileInfo{{Name: "a", Blocks: []*BlockInfo{{Hash: make([]byte, HashSize-1)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	badConfig, err := proto.Marshal(&ClusterConfig{Folders: []*Folder{{Devices: []*FolderDevice{{DeviceId: make([]byte, DeviceIDSize+1)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	mustMarshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	goodSealed := func() *SealedRecord {
		return &SealedRecord{Sequence: 1, Origin: make([]byte, DeviceIDSize), Counter: 1, FileKey: make([]byte, HashSize), Sealed: []byte{1}, Chunks: [][]byte{make([]byte, HashSize)}}
	}
	shortOrigin, shortKey, shortChunk, negSeq := goodSealed(), goodSealed(), goodSealed(), goodSealed()
	shortOrigin.Origin = shortOrigin.Origin[:31]
	shortKey.FileKey = nil
	shortChunk.Chunks = append(shortChunk.Chunks, make([]byte, 33))
	negSeq.Sequence = -1
	sealedFrame := func(r *SealedRecord) []byte {
		return rawFrame(MessageType_MESSAGE_TYPE_SEALED_INDEX, 0, mustMarshal(&SealedIndex{Folder: "f", Records: []*SealedRecord{goodSealed(), r}}))
	}
	inlineFrame := func(c *InlineChunk) []byte {
		return rawFrame(MessageType_MESSAGE_TYPE_SEALED_INDEX, 0, mustMarshal(&SealedIndex{Folder: "f", Records: []*SealedRecord{goodSealed()},
			Inline: []*InlineChunk{{Id: make([]byte, HashSize), Body: []byte{1}}, c}}))
	}
	claimFrame := func(edit func(*ReceiverClaim)) []byte {
		c := testClaim(3)
		edit(c)
		return rawFrame(MessageType_MESSAGE_TYPE_RECEIVER_CLAIMS, 0, mustMarshal(&ReceiverClaims{Claims: []*ReceiverClaim{testClaim(1), c}}))
	}
	tooMany := &ReceiverClaims{}
	for range MaxReceiverClaims + 1 {
		tooMany.Claims = append(tooMany.Claims, testClaim(1))
	}
	requestFrame := func(r *Request) []byte {
		return rawFrame(MessageType_MESSAGE_TYPE_REQUEST, 0, mustMarshal(r))
	}
	return map[string][]byte{
		"sealed origin of 31 bytes":      sealedFrame(shortOrigin),
		"sealed file key missing":        sealedFrame(shortKey),
		"sealed chunk ID of 33 bytes":    sealedFrame(shortChunk),
		"sealed negative sequence":       sealedFrame(negSeq),
		"inline chunk ID of 31 bytes":    inlineFrame(&InlineChunk{Id: make([]byte, 31), Body: []byte{1}}),
		"inline chunk without a body":    inlineFrame(&InlineChunk{Id: make([]byte, HashSize)}),
		"sealed chunk request, no ID":    requestFrame(&Request{Kind: RequestKind_REQUEST_KIND_SEALED_CHUNK, Size: 10}),
		"versions of a 31-byte file key": requestFrame(&Request{Kind: RequestKind_REQUEST_KIND_VERSIONS, FileKey: make([]byte, 31)}),
		"chunk list after a 5-byte ID":   requestFrame(&Request{Kind: RequestKind_REQUEST_KIND_CHUNK_LIST, ChunkId: make([]byte, 5)}),
		"chunk repair without a body":    requestFrame(&Request{Kind: RequestKind_REQUEST_KIND_CHUNK_REPAIR, ChunkId: make([]byte, 32)}),
		"chunk repair without an ID":     requestFrame(&Request{Kind: RequestKind_REQUEST_KIND_CHUNK_REPAIR, Body: []byte{1}}),
		"a body with another kind":       requestFrame(&Request{Kind: RequestKind_REQUEST_KIND_SEALED_CHUNK, ChunkId: make([]byte, 32), Body: []byte{1}}),
		"envelope over 64 KiB":           requestFrame(&Request{Kind: RequestKind_REQUEST_KIND_ENVELOPE_PUT, Envelope: make([]byte, MaxEnvelopeSize+1)}),
		"previous envelope hash 5 bytes": requestFrame(&Request{Kind: RequestKind_REQUEST_KIND_ENVELOPE_PUT, Previous: make([]byte, 5)}),
		"length 0":                       {0, 0, 0, 0, 7, 0},
		"length 1":                       {0, 0, 0, 1, 7, 0},
		"oversized length":               append(binary.BigEndian.AppendUint32(nil, MaxFrameSize+1), 7, 0),
		"type 0":                         rawFrame(0, 0, nil),
		"type 9 (reserved)":              rawFrame(9, 0, nil),
		"type 19 (reserved)":             rawFrame(19, 0, nil),
		"type 47 (reserved)":             rawFrame(47, 0, nil),
		"claim receiver of 31 bytes":     claimFrame(func(c *ReceiverClaim) { c.Receiver = c.Receiver[:31] }),
		"claim origin of 33 bytes":       claimFrame(func(c *ReceiverClaim) { c.Origin = append(c.Origin, 0) }),
		"claim log ID 0":                 claimFrame(func(c *ReceiverClaim) { c.LogId = 0 }),
		"claim counter 0":                claimFrame(func(c *ReceiverClaim) { c.Counter = 0 }),
		"claim sequence 0":               claimFrame(func(c *ReceiverClaim) { c.Sequence = 0 }),
		"claim sequence -1":              claimFrame(func(c *ReceiverClaim) { c.Sequence = -1 }),
		"4097 claims":                    rawFrame(MessageType_MESSAGE_TYPE_RECEIVER_CLAIMS, 0, mustMarshal(tooMany)),
		"negative ack sequence":          rawFrame(MessageType_MESSAGE_TYPE_SEALED_ACK, 0, mustMarshal(&SealedAck{Folder: "f", Sequence: -1})),
		"type 255":                       rawFrame(255, 0, nil),
		"flag bit 1":                     rawFrame(MessageType_MESSAGE_TYPE_PING, 2, nil),
		"flag bit 7":                     rawFrame(MessageType_MESSAGE_TYPE_PING, 0x80, nil),
		"garbage body":                   rawFrame(MessageType_MESSAGE_TYPE_INDEX, 0, []byte{0xff, 0xff, 0xff, 0xff}),
		"truncated field":                rawFrame(MessageType_MESSAGE_TYPE_CLOSE, 0, []byte{0x0a, 0x05, 'a'}),
		"invalid utf-8":                  rawFrame(MessageType_MESSAGE_TYPE_CLOSE, 0, []byte{0x0a, 0x02, 0xff, 0xfe}),
		"bad zstd":                       rawFrame(MessageType_MESSAGE_TYPE_INDEX, flagCompressed, []byte("definitely not zstd")),
		"truncated zstd":                 rawFrame(MessageType_MESSAGE_TYPE_INDEX, flagCompressed, smallPacked[:len(smallPacked)-3]),
		"zstd bomb, size declared":       rawFrame(MessageType_MESSAGE_TYPE_INDEX, flagCompressed, bombDeclared),
		"zstd bomb, size unknown":        rawFrame(MessageType_MESSAGE_TYPE_INDEX, flagCompressed, bombStreamed),
		"block hash of 31 bytes":         rawFrame(MessageType_MESSAGE_TYPE_INDEX, 0, badIndex),
		"device ID of 33 bytes":          rawFrame(MessageType_MESSAGE_TYPE_CLUSTER_CONFIG, 0, badConfig),
	}
}

func TestDecompressedSizeLimit(t *testing.T) {
	// A Close of exactly MaxFrameSize bytes decompressed is accepted; one
	// byte more is a bomb.
	for _, tc := range []struct {
		reason int
		ok     bool
	}{{MaxFrameSize - 6, true}, {MaxFrameSize - 5, true}, {MaxFrameSize - 4, false}} {
		body, err := proto.Marshal(&Close{Reason: strings.Repeat("z", tc.reason)})
		if err != nil {
			t.Fatal(err)
		}
		for name, packed := range map[string][]byte{"declared": zstdEncoder().EncodeAll(body, nil), "streamed": zstdStream(t, body)} {
			_, err = ReadMessage(bytes.NewReader(rawFrame(MessageType_MESSAGE_TYPE_CLOSE, flagCompressed, packed)))
			if tc.ok && err != nil {
				t.Errorf("%s: body of %d bytes: %v", name, len(body), err)
			}
			if !tc.ok && !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: body of %d bytes: %v, want ErrMalformed", name, len(body), err)
			}
		}
	}
}

func TestReadMessageTruncated(t *testing.T) {
	frame := closeFrame(t, 100)
	for _, n := range []int{1, 4, headerSize - 1, headerSize, headerSize + 1, len(frame) - 1} {
		_, err := ReadMessage(bytes.NewReader(frame[:n]))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("frame cut at %d of %d bytes: %v, want io.ErrUnexpectedEOF", n, len(frame), err)
		}
	}
	if _, err := ReadMessage(bytes.NewReader(frame)); err != nil {
		t.Fatalf("whole frame: %v", err)
	}
}

func TestReadMessageAllocatesAsBytesArrive(t *testing.T) {
	// A frame that declares 64 MiB but carries 100 bytes must not make the
	// reader allocate 64 MiB.
	hdr := binary.BigEndian.AppendUint32(nil, MaxFrameSize)
	frame := append(hdr, byte(MessageType_MESSAGE_TYPE_CLOSE), 0)
	frame = append(frame, make([]byte, 100)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadMessage(bytes.NewReader(frame))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadMessage = %v, want io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*bodyStep {
		t.Fatalf("allocated %d bytes for a 100-byte body", got)
	}
}

func TestValidateBoundaries(t *testing.T) {
	ok := func(m proto.Message) error {
		var buf bytes.Buffer
		if err := WriteMessage(&buf, m); err != nil {
			return err
		}
		_, err := ReadMessage(&buf)
		return err
	}
	for _, n := range []int{HashSize - 1, HashSize, HashSize + 1} {
		err := ok(&Index{Files: []*FileInfo{{Blocks: []*BlockInfo{{Hash: make([]byte, n)}}}}})
		if (n == HashSize) != (err == nil) {
			t.Errorf("block hash of %d bytes: %v", n, err)
		}
		err = ok(&Request{Hash: make([]byte, n)})
		if (n == HashSize) != (err == nil) {
			t.Errorf("request hash of %d bytes: %v", n, err)
		}
	}
	for _, n := range []int{DeviceIDSize - 1, DeviceIDSize, DeviceIDSize + 1} {
		err := ok(&ClusterConfig{Folders: []*Folder{{Devices: []*FolderDevice{{DeviceId: make([]byte, n)}}}}})
		if (n == DeviceIDSize) != (err == nil) {
			t.Errorf("device ID of %d bytes: %v", n, err)
		}
	}
	for _, v := range []int64{-1, 0, 1} {
		for name, m := range map[string]proto.Message{
			"file size":     &IndexUpdate{Files: []*FileInfo{{Size: v}}},
			"block offset":  &Index{Files: []*FileInfo{{Blocks: []*BlockInfo{{Offset: v, Hash: testHash(1)}}}}},
			"request offst": &Request{Offset: v},
		} {
			if err := ok(m); (v >= 0) != (err == nil) {
				t.Errorf("%s %d: %v", name, v, err)
			}
		}
	}
	for _, size := range []uint32{MaxRequestSize - 1, MaxRequestSize, MaxRequestSize + 1} {
		if err := ok(&Request{Size: size}); (size <= MaxRequestSize) != (err == nil) {
			t.Errorf("request size %d: %v", size, err)
		}
	}
	if err := ok(&Request{}); err != nil {
		t.Errorf("request without hash: %v", err)
	}
	if err := ok(&Request{Offset: -1}); !errors.Is(err, ErrMalformed) {
		t.Errorf("sending a request with a negative offset: %v, want ErrMalformed", err)
	}
}
