package crypt

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them (or
// fs.ErrNotExist for a missing identity), so callers decide with errors.Is.
var (
	// ErrInvalidDeviceID: a device ID's text is malformed (length, alphabet,
	// check character) or not in canonical form.
	ErrInvalidDeviceID = errors.New("invalid device ID")

	// ErrIdentity: identity files exist but are unusable (only one of the
	// pair, bad PEM, key does not match the certificate).
	ErrIdentity = errors.New("invalid identity")

	// ErrNoPeerCertificate: a TLS connection state has no verified peer
	// certificate (handshake not complete, or the peer sent none).
	ErrNoPeerCertificate = errors.New("no verified peer certificate")

	// ErrWrongPassword: the envelope is intact but the password does not
	// open it. A damaged password stanza is indistinguishable from a wrong
	// password and also reads as ErrWrongPassword.
	ErrWrongPassword = errors.New("wrong password")

	// ErrEmptyPassword: a password of zero bytes was given. When opening,
	// the error also wraps ErrWrongPassword.
	ErrEmptyPassword = errors.New("empty password")

	// ErrEnvelope: the envelope is malformed, damaged, or holds no part the
	// given identity can open.
	ErrEnvelope = errors.New("damaged envelope")

	// ErrFormat: unknown format/version byte or malformed framing of a
	// sealed chunk or record, or of a chunk ID or file key in text form.
	ErrFormat = errors.New("unknown or malformed format")

	// ErrAuth: authentication failed: the ciphertext was tampered with,
	// sealed with another key, or bound to another chunk ID or header.
	ErrAuth = errors.New("authentication failed")

	// ErrChunkID: a chunk opened, but its plaintext does not hash to its ID.
	ErrChunkID = errors.New("chunk plaintext does not match its ID")

	// ErrTooLarge: a chunk or record exceeds MaxChunkSize or MaxRecordSize.
	ErrTooLarge = errors.New("too large")
)
