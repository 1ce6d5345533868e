// Package netfail tells network failures that may pass (a timeout, a reset
// or refused connection, a connection closed mid-response) from the rest,
// for the retry classifiers of storage/blob.
package netfail

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
)

// Transient reports whether err is a network failure worth retrying. A
// context's error is never transient, though context.DeadlineExceeded
// calls itself a timeout.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, errno := range []error{
		syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN,
	} {
		if errors.Is(err, errno) {
			return true
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	}
	var ue *url.Error
	var oe *net.OpError
	if errors.As(err, &ue) && (errors.Is(err, io.EOF) || errors.As(err, &oe)) {
		// The server closed the connection before answering, or the
		// connection failed under the request (once the transport saw a
		// reset it may report its own closed socket: net.ErrClosed).
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
