//go:build unix

package local

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// reuseAddr is a net.ListenConfig Control that sets SO_REUSEADDR, so that
// several nodes on one host can all bind the discovery port. On Linux every
// such socket receives each broadcast and multicast datagram.
func reuseAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("setting SO_REUSEADDR: %w", serr)
	}
	return nil
}

// joinGroup joins the IPv6 multicast group on ifi. Joining a group the
// socket already joined there is not an error.
func joinGroup(conn *net.UDPConn, group netip.Addr, ifi *net.Interface) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	mreq := &unix.IPv6Mreq{Multiaddr: group.As16(), Interface: uint32(ifi.Index)}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, mreq)
	}); err != nil {
		return err
	}
	if serr == unix.EADDRINUSE {
		return nil
	}
	if serr != nil {
		return fmt.Errorf("joining %v on %s: %w", group, ifi.Name, serr)
	}
	return nil
}
