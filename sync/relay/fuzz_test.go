package relay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
)

// FuzzReadMessage: no input panics or reads past its frame, errors are
// ErrMalformed or a short read, and what decodes re-encodes to a frame that
// decodes to the same message.
func FuzzReadMessage(f *testing.F) {
	var id crypt.DeviceID
	var key [keySize]byte
	for _, m := range []*Message{joinMessage(), pingMessage(), pongMessage(), connectMessage(id),
		invitationMessage(id, key), responseMessage(Response_TOO_MANY_SESSIONS, "full")} {
		var buf bytes.Buffer
		if err := writeMessage(&buf, m); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add(binary.BigEndian.AppendUint32(nil, MaxFrameSize+1))
	f.Add([]byte{0, 0, 0, 3, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		m, err := readMessage(r)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if consumed := len(data) - r.Len(); consumed > 4+MaxFrameSize {
			t.Fatalf("read %d bytes for one frame", consumed)
		}
		var buf bytes.Buffer
		if err := writeMessage(&buf, m); err != nil {
			t.Fatalf("re-encoding %v: %v", m, err)
		}
		m2, err := readMessage(&buf)
		if err != nil || !proto.Equal(m, m2) {
			t.Fatalf("round trip: %v -> %v, %v", m, m2, err)
		}
	})
}

// FuzzParseURL: relay URLs arrive from peers and discovery; no input
// panics, and an accepted URL rebuilt from its parts parses the same.
func FuzzParseURL(f *testing.F) {
	f.Add("relay://127.0.0.1:22067/?id=AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA")
	f.Add("relay://[::1]:1?id=x")
	f.Add("relay://h:1/?id=%zz")
	f.Fuzz(func(t *testing.T, s string) {
		hp, id, err := ParseURL(s)
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("error without ErrBadURL: %v", err)
			}
			return
		}
		hp2, id2, err := ParseURL("relay://" + hp + "/?id=" + id.String())
		if err != nil || hp2 != hp || id2 != id {
			t.Fatalf("rebuilt %q: %q %v %v", s, hp2, id2, err)
		}
	})
}
