package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"lockstep/crypt"
)

// Dial reaches target through the relay at relayURL: it asks the relay for
// a session and joins it, and returns a raw net.Conn spliced to target, on
// which the caller runs the TLS client handshake of its own protocol. id is
// the dialing device's identity, presented to the relay.
//
// Errors: ErrBadURL, ErrWrongRelay (with the *crypt.UnknownDeviceError),
// ErrNotRegistered, ErrTooManySessions, ErrRefused (including a target that
// never joined the session), ErrMalformed, ctx's error, or a network error.
// Dial starts no goroutine that outlives it.
func Dial(ctx context.Context, id *crypt.Identity, relayURL string, target crypt.DeviceID) (net.Conn, error) {
	hostport, relayID, err := ParseURL(relayURL)
	if err != nil {
		return nil, err
	}
	key, err := requestSession(ctx, id, hostport, relayID, target)
	if err != nil {
		return nil, err
	}
	c, err := joinSession(ctx, hostport, key)
	if err != nil {
		return nil, fmt.Errorf("relay %s: joining the session with %s: %w", hostport, target.Short(), err)
	}
	return c, nil
}

// requestSession sends Connect{target} and returns the session key of the
// Invitation that answers it.
func requestSession(ctx context.Context, id *crypt.Identity, hostport string, relayID, target crypt.DeviceID) ([keySize]byte, error) {
	var key [keySize]byte
	tc, err := dialProtocol(ctx, id, hostport, relayID)
	if err != nil {
		return key, err
	}
	defer tc.Close()
	stop := context.AfterFunc(ctx, func() { tc.NetConn().Close() })
	defer stop()
	tc.NetConn().SetDeadline(time.Now().Add(handshakeTimeout))
	if err := writeMessage(tc, connectMessage(target)); err != nil {
		return key, ctxOr(ctx, fmt.Errorf("relay %s: sending connect: %w", hostport, err))
	}
	m, err := readMessage(tc)
	if err != nil {
		return key, ctxOr(ctx, fmt.Errorf("relay %s: reading the answer to connect: %w", hostport, err))
	}
	switch b := m.GetBody().(type) {
	case *Message_Response:
		if err := responseError(b.Response); err != nil {
			return key, fmt.Errorf("relay %s: connecting to %s: %w", hostport, target.Short(), err)
		}
	case *Message_Invitation:
		if crypt.DeviceID(b.Invitation.From) != target {
			return key, fmt.Errorf("relay %s: %w: invitation from another device", hostport, ErrMalformed)
		}
		return [keySize]byte(b.Invitation.Key), nil
	}
	return key, fmt.Errorf("relay %s: %w: unexpected answer to connect", hostport, ErrMalformed)
}

// dialProtocol opens a protocol connection to the relay at hostport and
// checks that it is relayID.
func dialProtocol(ctx context.Context, id *crypt.Identity, hostport string, relayID crypt.DeviceID) (*tls.Conn, error) {
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(hctx, "tcp", hostport)
	if err != nil {
		return nil, ctxOr(ctx, fmt.Errorf("relay %s: %w", hostport, err))
	}
	cfg := crypt.ClientTLSConfig(id, relayID)
	cfg.NextProtos = []string{ALPN}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		if ude, ok := errors.AsType[*crypt.UnknownDeviceError](err); ok {
			return nil, fmt.Errorf("relay %s: %w: expected %s: %w", hostport, ErrWrongRelay, relayID, ude)
		}
		return nil, ctxOr(ctx, fmt.Errorf("relay %s: TLS handshake: %w", hostport, err))
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != ALPN {
		raw.Close()
		return nil, fmt.Errorf("relay %s: speaks %q, not %s", hostport, p, ALPN)
	}
	return tc, nil
}

// joinSession opens a session connection with key and waits (at most as
// long as a key lives, plus the handshake time) for the relay's go-ahead.
func joinSession(ctx context.Context, hostport string, key [keySize]byte) (*net.TCPConn, error) {
	dctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	raw, err := (&net.Dialer{}).DialContext(dctx, "tcp", hostport)
	cancel()
	if err != nil {
		return nil, ctxOr(ctx, err)
	}
	c := raw.(*net.TCPConn)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	c.SetDeadline(time.Now().Add(sessionKeyTTL + handshakeTimeout))
	var msg [joinSize]byte
	copy(msg[:], sessionMagic)
	copy(msg[len(sessionMagic):], key[:])
	var answer [1]byte
	_, err = c.Write(msg[:])
	if err == nil {
		_, err = io.ReadFull(c, answer[:])
	}
	if !stop() {
		c.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		c.Close()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: relay closed the session (unknown, used or expired key)", ErrRefused)
		}
		return nil, err
	}
	if answer[0] != JoinOK {
		c.Close()
		return nil, fmt.Errorf("%w: the other device did not join (code %d)", ErrRefused, answer[0])
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// ctxOr returns ctx's error once ctx has ended (the cause of err), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}
