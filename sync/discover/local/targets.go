package local

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// defaultTargets returns, for port, the directed broadcast address of every
// up, broadcast-capable IPv4 interface and [ff12::8384%iface] on every up,
// multicast-capable interface with an IPv6 address, as they are now.
func defaultTargets(port int) ([]netip.AddrPort, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	var out []netip.AddrPort
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		hasV6 := false
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if ifi.Flags&net.FlagBroadcast != 0 {
				if b, ok := broadcastAddr(ipnet); ok {
					out = append(out, netip.AddrPortFrom(b, uint16(port)))
				}
			}
			if ipnet.IP.To4() == nil && ipnet.IP.To16() != nil {
				hasV6 = true
			}
		}
		if hasV6 && ifi.Flags&net.FlagMulticast != 0 {
			out = append(out, netip.AddrPortFrom(multicastGroup.WithZone(ifi.Name), uint16(port)))
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return slices.Compact(out), nil
}

// broadcastAddr returns the directed broadcast address of an IPv4 network
// with at most a /30 prefix (a /31 or /32 has none).
func broadcastAddr(n *net.IPNet) (netip.Addr, bool) {
	ip := n.IP.To4()
	ones, bits := n.Mask.Size()
	if ip == nil || bits == 0 || bits-ones < 2 {
		return netip.Addr{}, false
	}
	mask := n.Mask
	if len(mask) == net.IPv6len {
		mask = mask[12:]
	}
	if len(mask) != net.IPv4len {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i := range b {
		b[i] = ip[i] | ^mask[i]
	}
	return netip.AddrFrom4(b), true
}

// multicastInterfaces returns the up, multicast-capable interfaces.
func multicastInterfaces() ([]net.Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	var out []net.Interface
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagMulticast != 0 {
			out = append(out, ifi)
		}
	}
	return out, nil
}

// resolveTarget turns a configured host:port into an address, looking the
// host up when it is a name.
func resolveTarget(ctx context.Context, t string) ([]netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(t); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
	}
	host, port, err := splitHostPort(t)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", t, err)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolving target %q: %w", t, err)
	}
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		out = append(out, netip.AddrPortFrom(ip.Unmap(), uint16(port)))
	}
	return out, nil
}
