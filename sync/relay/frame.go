package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
)

// ALPN is the application protocol of a relay protocol connection.
const ALPN = "lockstep-relay/1"

// MaxFrameSize is the largest length a frame may announce.
const MaxFrameSize = 1024

// maxResponseMessage bounds Response.message.
const maxResponseMessage = 200

// Session join: the magic every session connection starts with, and the
// answer codes the relay sends when both halves have arrived (or not).
const (
	sessionMagic = "LSRELAY1"
	keySize      = 32
	joinSize     = len(sessionMagic) + keySize

	// JoinOK: both halves arrived; splicing starts.
	JoinOK byte = 0
	// JoinTimedOut: the partner did not join before the key expired.
	JoinTimedOut byte = 1
)

// Time limits of the protocol (see the package comment).
const (
	handshakeTimeout = 10 * time.Second
	writeTimeout     = 10 * time.Second
	sessionKeyTTL    = 30 * time.Second
	pingInterval     = 60 * time.Second
	idleTimeout      = 3 * time.Minute
	// spliceIdle ends a spliced session in which one direction carried
	// nothing for this long. Devices' own protocol pings every 90 s at
	// most, so only dead or hostile sessions (holding a MaxSessions place
	// for nothing) reach it.
	spliceIdle = 5 * time.Minute
)

var (
	// ErrNotRegistered: the target device is not registered with that relay.
	ErrNotRegistered = errors.New("device is not registered with the relay")

	// ErrTooManySessions: the relay is at its session limit.
	ErrTooManySessions = errors.New("relay has too many sessions")

	// ErrRefused: the relay refused a request for another reason, or the
	// partner of a session never joined.
	ErrRefused = errors.New("relay refused the request")

	// ErrWrongRelay: the server at the URL's address is not the device the
	// URL names. It comes wrapped with a *crypt.UnknownDeviceError holding
	// the ID the server presented.
	ErrWrongRelay = errors.New("relay is not the device its URL names")

	// ErrMalformed: a peer sent a frame or message that breaks the protocol.
	ErrMalformed = errors.New("malformed relay message")

	// ErrBadURL: a relay URL is not relay://HOST:PORT/?id=DEVICEID.
	ErrBadURL = errors.New("invalid relay URL")
)

// ParseURL splits a relay URL, relay://HOST:PORT/?id=DEVICEID, into the
// address to dial and the relay's device ID. The port and id are required;
// the path must be empty or "/". Errors wrap ErrBadURL.
func ParseURL(s string) (hostport string, id crypt.DeviceID, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", id, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	if u.Scheme != "relay" {
		return "", id, fmt.Errorf("%w %q: scheme must be relay://", ErrBadURL, s)
	}
	if u.User != nil || u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return "", id, fmt.Errorf("%w %q: want relay://HOST:PORT/?id=ID", ErrBadURL, s)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port == "" {
		return "", id, fmt.Errorf("%w %q: missing port", ErrBadURL, s)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", id, fmt.Errorf("%w %q: %w", ErrBadURL, s, err)
	}
	ids := q["id"]
	if len(ids) != 1 {
		return "", id, fmt.Errorf("%w %q: want exactly one ?id=DEVICEID", ErrBadURL, s)
	}
	id, err = crypt.ParseDeviceID(ids[0])
	if err != nil {
		return "", id, fmt.Errorf("%w %q: %w", ErrBadURL, s, err)
	}
	return net.JoinHostPort(host, port), id, nil
}

// writeMessage writes m as one frame with a single Write. It refuses a
// message the receiver would reject.
func writeMessage(w io.Writer, m *Message) error {
	if err := validate(m); err != nil {
		return err
	}
	b := make([]byte, 4, 4+64)
	b, err := proto.MarshalOptions{}.MarshalAppend(b, m)
	if err != nil {
		return fmt.Errorf("encoding relay message: %w", err)
	}
	n := len(b) - 4
	if n > MaxFrameSize {
		return fmt.Errorf("%w: message of %d bytes", ErrMalformed, n)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	_, err = w.Write(b)
	return err
}

// readMessage reads one frame and decodes and validates its message. A
// violation of the framing or message rules returns an error wrapping
// ErrMalformed; a failed read returns the read's error. At most
// MaxFrameSize bytes are buffered.
func readMessage(r io.Reader) (*Message, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameSize {
		return nil, fmt.Errorf("%w: frame of %d bytes (limit %d)", ErrMalformed, n, MaxFrameSize)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return decodeMessage(buf)
}

// decodeMessage decodes and validates a frame's body.
func decodeMessage(body []byte) (*Message, error) {
	m := new(Message)
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := validate(m); err != nil {
		return nil, err
	}
	return m, nil
}

// validate checks the rules relay.proto marks "checked on receipt".
func validate(m *Message) error {
	switch b := m.GetBody().(type) {
	case *Message_Join, *Message_Ping, *Message_Pong:
		return nil
	case *Message_Connect:
		if b.Connect == nil || len(b.Connect.Device) != len(crypt.DeviceID{}) {
			return fmt.Errorf("%w: Connect.device must be %d bytes", ErrMalformed, len(crypt.DeviceID{}))
		}
		return nil
	case *Message_Invitation:
		if b.Invitation == nil || len(b.Invitation.From) != len(crypt.DeviceID{}) || len(b.Invitation.Key) != keySize {
			return fmt.Errorf("%w: Invitation needs a 32-byte from and key", ErrMalformed)
		}
		return nil
	case *Message_Response:
		if b.Response == nil || len(b.Response.Message) > maxResponseMessage {
			return fmt.Errorf("%w: Response.message over %d bytes", ErrMalformed, maxResponseMessage)
		}
		return nil
	}
	return fmt.Errorf("%w: no message body", ErrMalformed)
}

// Message constructors.

func joinMessage() *Message { return &Message{Body: &Message_Join{Join: &Join{}}} }
func pingMessage() *Message { return &Message{Body: &Message_Ping{Ping: &Ping{}}} }
func pongMessage() *Message { return &Message{Body: &Message_Pong{Pong: &Pong{}}} }

func connectMessage(target crypt.DeviceID) *Message {
	return &Message{Body: &Message_Connect{Connect: &Connect{Device: target[:]}}}
}

func invitationMessage(from crypt.DeviceID, key [keySize]byte) *Message {
	return &Message{Body: &Message_Invitation{Invitation: &Invitation{From: from[:], Key: key[:]}}}
}

func responseMessage(code Response_Code, msg string) *Message {
	return &Message{Body: &Message_Response{Response: &Response{Code: code, Message: msg}}}
}

// responseError maps a non-OK Response to an error wrapping the matching
// sentinel.
func responseError(r *Response) error {
	var base error
	switch r.GetCode() {
	case Response_OK:
		return nil
	case Response_NOT_REGISTERED:
		base = ErrNotRegistered
	case Response_TOO_MANY_SESSIONS:
		base = ErrTooManySessions
	default:
		base = ErrRefused
	}
	if r.GetMessage() == "" {
		return base
	}
	return fmt.Errorf("%w: %s", base, r.GetMessage())
}
