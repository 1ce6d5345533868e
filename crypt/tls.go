package crypt

import (
	"crypto/tls"
	"fmt"
)

// ALPN is the application protocol both sides of a lockstep connection
// announce.
const ALPN = "lockstep/1"

// UnknownDeviceError is what a handshake fails with when the peer is not
// trusted: on the server, a client whose ID trusted rejects; on the client, a
// server that is not the expected device. The server learns the unknown
// client's ID from it (errors.As on the error of HandshakeContext) to record
// the device as pending.
type UnknownDeviceError struct {
	ID DeviceID
	// Name is the name the device's certificate gives it (its common
	// name): the device's own word, unchecked, for showing to a person.
	Name string
}

func (e *UnknownDeviceError) Error() string {
	return "unknown device " + e.ID.String()
}

// ServerTLSConfig returns a TLS 1.3 server configuration presenting id's
// certificate and requiring one from the client. Certificate chains are not
// validated (certificates are self-signed); instead the client's key must
// hash to a device ID for which trusted returns true, else the handshake
// fails with *UnknownDeviceError. trusted must not be nil; it is called once
// per handshake, from the handshaking goroutine, and must be safe for
// concurrent use.
func ServerTLSConfig(id *Identity, trusted func(DeviceID) bool) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.Certificate},
		ClientAuth:   tls.RequireAnyClientCert,
		NextProtos:   []string{ALPN},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrNoPeerCertificate
			}
			peer := DeviceIDFromCert(cs.PeerCertificates[0])
			if !trusted(peer) {
				return &UnknownDeviceError{ID: peer, Name: cs.PeerCertificates[0].Subject.CommonName}
			}
			return nil
		},
	}
}

// ClientTLSConfig returns a TLS 1.3 client configuration presenting id's
// certificate that accepts exactly the server whose key hashes to peer; any
// other server fails the handshake with *UnknownDeviceError.
//
// In TLS 1.3 the client finishes its handshake before the server has checked
// the client's certificate, so a server that refuses this client shows up as
// an error on the first read, not in the client's handshake.
func ClientTLSConfig(id *Identity, peer DeviceID) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.Certificate},
		NextProtos:   []string{ALPN},
		// Chain and name validation are replaced by the key pin below.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrNoPeerCertificate
			}
			got := DeviceIDFromCert(cs.PeerCertificates[0])
			if got != peer {
				return &UnknownDeviceError{ID: got}
			}
			return nil
		},
	}
}

// PeerDeviceID returns the device ID of the peer of a completed handshake
// made with ServerTLSConfig or ClientTLSConfig (which verified it).
func PeerDeviceID(cs tls.ConnectionState) (DeviceID, error) {
	if !cs.HandshakeComplete || len(cs.PeerCertificates) == 0 {
		return DeviceID{}, fmt.Errorf("peer device ID: %w", ErrNoPeerCertificate)
	}
	return DeviceIDFromCert(cs.PeerCertificates[0]), nil
}
