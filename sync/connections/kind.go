package connections

import (
	"net"
	"strings"
)

// Kind classifies c: TypeLAN, TypeWAN or TypeRelay.
func (c *Conn) Kind() string {
	if c.Relay != "" {
		return TypeRelay
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return TypeWAN
	}
	// A link-local IPv6 address carries its zone ("fe80::1%eth0"), which
	// ParseIP refuses.
	host, _, _ = strings.Cut(host, "%")
	ip := net.ParseIP(host)
	if ip == nil {
		return TypeWAN
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || onLink(ip) {
		return TypeLAN
	}
	return TypeWAN
}

// onLink reports whether ip is in the subnet of one of this machine's
// interfaces: a public address on the same LAN is still a LAN peer.
func onLink(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.Contains(ip) {
			return true
		}
	}
	return false
}
