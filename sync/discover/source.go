package discover

import (
	"net"
	"net/netip"
)

// Source is what per-source limits count a peer against: its IPv4 address,
// or the /64 of its IPv6 address (the least a site is given). The zero
// Addr gives the zero Prefix, one source for all such. The discovery
// service, the relay and the connection service all bound what one source
// may hold, since device keys cost nothing to make.
func Source(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// SourceOf is Source of a connection's remote address; an address that is
// not IP gives the zero Prefix.
func SourceOf(addr net.Addr) netip.Prefix {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Prefix{}
	}
	return Source(ap.Addr())
}
