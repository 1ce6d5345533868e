package protocol

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestDecodeAnswer: answers to check requests are checked like frames.
func TestDecodeAnswer(t *testing.T) {
	good := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	id := make([]byte, HashSize)
	rec := &SealedRecord{Sequence: 1, Origin: make([]byte, DeviceIDSize), FileKey: id, Chunks: [][]byte{id}}
	if err := DecodeAnswer(good(&LogPage{Records: []*SealedRecord{rec}, LastSequence: 1}), &LogPage{}); err != nil {
		t.Fatalf("good log page: %v", err)
	}
	if err := DecodeAnswer(good(&ChunkList{Chunks: []*ChunkEntry{{Id: id, Size: 9}}}), &ChunkList{}); err != nil {
		t.Fatalf("good chunk list: %v", err)
	}
	bad := map[string]struct {
		data []byte
		into proto.Message
	}{
		"record with a short origin": {good(&LogPage{Records: []*SealedRecord{{Origin: id[:5], FileKey: id}}}), &LogPage{}},
		"negative last sequence":     {good(&LogPage{LastSequence: -1}), &LogPage{}},
		"chunk ID of 31 bytes":       {good(&ChunkList{Chunks: []*ChunkEntry{{Id: id[:31], Size: 1}}}), &ChunkList{}},
		"negative chunk size":        {good(&ChunkList{Chunks: []*ChunkEntry{{Id: id, Size: -1}}}), &ChunkList{}},
		"not protobuf":               {[]byte{0xff, 0xff, 0xff}, &ChunkList{}},
		"versions with a bad record": {good(&SealedIndex{Records: []*SealedRecord{{Origin: id[:1], FileKey: id}}}), &SealedIndex{}},
	}
	for name, c := range bad {
		if err := DecodeAnswer(c.data, c.into); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}
