//go:build !unix

package local

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
)

// reuseAddr does nothing where SO_REUSEADDR is not set through x/sys/unix:
// there only the first node on a host receives announcements.
func reuseAddr(_, _ string, _ syscall.RawConn) error { return nil }

// joinGroup is not supported here: IPv6 announcements are sent, not received.
func joinGroup(_ *net.UDPConn, _ netip.Addr, _ *net.Interface) error {
	return errors.ErrUnsupported
}
