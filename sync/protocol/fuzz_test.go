package protocol

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"
)

func FuzzReadMessage(f *testing.F) {
	for _, m := range everyMessage() {
		frame, err := appendFrame(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame)
	}
	var files []*FileInfo
	for i := range 50 {
		files = append(files, testFile(i, 2))
	}
	compressed, err := appendFrame(nil, &Index{Folder: "f", Files: files})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(compressed)
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 2, 7, 0})
	for name, frame := range malformedFrames(f) {
		if len(frame) < 4096 || name == "zstd bomb, size declared" {
			f.Add(frame)
		}
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := ReadMessage(bytes.NewReader(data))
		if err != nil {
			if msg != nil {
				t.Fatalf("message %v with error %v", msg, err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("error of an unexpected kind: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := WriteMessage(&buf, msg); err != nil {
			t.Fatalf("writing back a message that was read: %v", err)
		}
		again, err := ReadMessage(&buf)
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		if !proto.Equal(msg, again) {
			t.Fatalf("round trip changed the message:\n%v\n%v", msg, again)
		}
		if buf.Len() != 0 {
			t.Fatalf("%d bytes left after reading back", buf.Len())
		}
	})
}
