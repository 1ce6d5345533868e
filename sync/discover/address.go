// Package discover holds what lockstep's discovery packages share: the
// parser of the addresses devices announce, tcp://HOST:PORT and
// relay://HOST:PORT/?id=RELAYDEVICEID, and the source (Source) that the
// discovery service, the relay and the connection service count a peer
// against in their per-source limits. Local discovery (package local) and
// global discovery (package global) apply their own policy on top: which
// hosts to keep, and what an unspecified host stands for.
//
// Invariants:
//   - ParseAddress accepts exactly the grammar documented on it; everything
//     else is an error wrapping ErrMalformed, and no input makes it panic.
//   - An accepted address is at most MaxAddressLen bytes of printable ASCII.
//   - String is canonical: for every accepted s, ParseAddress(a.String())
//     gives a back unchanged whenever a.String() fits MaxAddressLen (the
//     canonical form of a relay ID may be longer than the one announced).
//   - The package is a pure library: no goroutines, no I/O, no globals
//     beyond its sentinel error.
package discover

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"lockstep/crypt"
)

// MaxAddressLen is the longest address, in bytes, a device may announce.
const MaxAddressLen = 256

// Address schemes.
const (
	// SchemeTCP is a direct TLS-over-TCP address.
	SchemeTCP = "tcp"
	// SchemeRelay is a relay through which the device is reachable.
	SchemeRelay = "relay"
)

// ErrMalformed is wrapped by every error of ParseAddress.
var ErrMalformed = errors.New("malformed address")

// Address is a parsed announced address. At most one of Host and IP is
// set; neither is for an empty host.
type Address struct {
	// Scheme is SchemeTCP or SchemeRelay.
	Scheme string
	// Host is a DNS name in lower case (a final dot kept), or "" when the
	// host is an IP address or empty.
	Host string
	// IP is the host when it is an IP address: IPv4-mapped IPv6 addresses
	// are unmapped, and an IPv6 address may carry a zone. Invalid
	// otherwise.
	IP netip.Addr
	// Port is 1-65535.
	Port uint16
	// Relay is the relay's device ID in a relay:// address, zero in a
	// tcp:// one.
	Relay crypt.DeviceID
}

// ParseAddress parses an announced address. s must be at most
// MaxAddressLen bytes of printable ASCII without spaces, and either
//
//	tcp://HOST:PORT         optionally followed by "/"
//	relay://HOST:PORT/?id=DEVICEID   the "/" optional
//
// with the scheme in lower case, and no user info, fragment or other path
// or query. PORT is decimal 1-65535 without leading zeros. HOST is
//
//   - an IPv4 address in dotted decimal (no leading zeros),
//   - an IPv6 address in brackets, optionally with a zone written "%25ZONE"
//     (RFC 6874) where ZONE is letters, digits and "._~-",
//   - a DNS name: dot-separated labels of 1 to 63 letters, digits, "-" or
//     "_", not starting or ending with "-", an optional final dot, the last
//     label not a number (all digits, or 0x and hex digits) so that no
//     resolver reads it as an IPv4 address,
//   - or, in tcp:// only, empty; a relay:// host must not be unspecified.
//
// DEVICEID is a non-zero device ID written with letters, digits and
// dashes (see crypt.ParseDeviceID). Errors wrap ErrMalformed and quote (a
// prefix of) s.
func ParseAddress(s string) (Address, error) {
	if len(s) > MaxAddressLen {
		return Address{}, fmt.Errorf("%w %.32q...: %d bytes, at most %d allowed", ErrMalformed, s, len(s), MaxAddressLen)
	}
	bad := func(why string) (Address, error) {
		return Address{}, fmt.Errorf("%w %q: %s", ErrMalformed, s, why)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return bad("has a space, control or non-ASCII byte")
		}
	}
	var a Address
	var rest string
	switch {
	case strings.HasPrefix(s, SchemeTCP+"://"):
		a.Scheme, rest = SchemeTCP, s[len(SchemeTCP+"://"):]
	case strings.HasPrefix(s, SchemeRelay+"://"):
		a.Scheme, rest = SchemeRelay, s[len(SchemeRelay+"://"):]
	default:
		return bad("scheme must be tcp:// or relay://, in lower case")
	}
	if strings.ContainsRune(rest, '#') {
		return bad("must have no fragment")
	}
	hostport, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hostport, tail = rest[:i], rest[i:]
	}
	if why := a.setHostPort(hostport); why != "" {
		return bad(why)
	}
	path, query, hasQuery := strings.Cut(tail, "?")
	if path != "" && path != "/" {
		return bad("must have no path")
	}
	switch a.Scheme {
	case SchemeTCP:
		if hasQuery {
			return bad("a tcp:// address has no query")
		}
	case SchemeRelay:
		if a.Unspecified() {
			return bad("a relay:// address needs the relay's host")
		}
		id, ok := strings.CutPrefix(query, "id=")
		if !ok || !deviceIDText(id) {
			return bad("a relay:// address needs exactly the query ?id=RELAYDEVICEID")
		}
		var err error
		if a.Relay, err = crypt.ParseDeviceID(id); err != nil {
			return bad(err.Error())
		}
		if a.Relay.IsZero() {
			return bad("relay device ID is zero")
		}
	}
	return a, nil
}

// setHostPort sets a's host and port from HOST:PORT, or explains in a
// phrase why it cannot.
func (a *Address) setHostPort(hp string) (why string) {
	var host, port string
	if inner, ok := strings.CutPrefix(hp, "["); ok {
		end := strings.IndexByte(inner, ']')
		if end < 0 {
			return "unclosed [ in host"
		}
		if port, ok = strings.CutPrefix(inner[end+1:], ":"); !ok {
			return "must have HOST:PORT"
		}
		ip, ok := parseIPv6(inner[:end])
		if !ok {
			return "bad IPv6 address in brackets"
		}
		a.IP = ip
	} else {
		i := strings.LastIndexByte(hp, ':')
		if i < 0 {
			return "must have HOST:PORT"
		}
		host, port = hp[:i], hp[i+1:]
		if host != "" {
			if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
				a.IP = ip
			} else if validHostName(host) {
				a.Host = strings.ToLower(host)
			} else {
				return "bad host"
			}
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || port[0] == '0' {
		return "port must be 1-65535"
	}
	a.Port = uint16(n)
	return ""
}

// parseIPv6 parses the text between the brackets of an IPv6 host:
// ADDRESS or ADDRESS%25ZONE.
func parseIPv6(s string) (netip.Addr, bool) {
	addr, zone, hasZone := strings.Cut(s, "%25")
	if strings.ContainsRune(addr, '%') || (hasZone && !validZone(zone)) {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || !ip.Is6() {
		return netip.Addr{}, false
	}
	if hasZone {
		ip = ip.WithZone(zone)
	}
	return ip.Unmap(), true
}

// validZone reports whether z is a zone ParseAddress accepts: one or more
// letters, digits or "._~-" (RFC 3986 unreserved characters), so it needs
// no escaping in a URL.
func validZone(z string) bool {
	if z == "" {
		return false
	}
	for _, c := range []byte(z) {
		if !alnum(c) && c != '.' && c != '_' && c != '~' && c != '-' {
			return false
		}
	}
	return true
}

// validHostName reports whether h is a DNS name as ParseAddress accepts it:
// dot-separated labels of 1 to 63 letters, digits, hyphens or underscores,
// not starting or ending with a hyphen, an optional final dot, at most 253
// bytes, and a last label that is not a number.
func validHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	last := ""
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !alnum(c) && c != '-' && c != '_' {
				return false
			}
		}
		last = label
	}
	return !numeric(last)
}

// numeric reports whether a last label makes a name an IPv4 address for a
// URL parser or inet_aton: all digits, or "0x" followed by hex digits.
func numeric(label string) bool {
	digits := "0123456789"
	if len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
		label, digits = label[2:], "0123456789abcdefABCDEF"
	}
	for _, c := range []byte(label) {
		if strings.IndexByte(digits, c) < 0 {
			return false
		}
	}
	return true
}

// deviceIDText reports whether s is non-empty and holds only the
// characters of a written device ID: letters, digits and dashes.
func deviceIDText(s string) bool {
	for _, c := range []byte(s) {
		if !alnum(c) && c != '-' {
			return false
		}
	}
	return s != ""
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// Unspecified reports whether the host means "wherever this announcement
// came from": empty, 0.0.0.0 or ::.
func (a Address) Unspecified() bool {
	if a.IP.IsValid() {
		return a.IP.IsUnspecified()
	}
	return a.Host == ""
}

// Loopback reports whether the host is a loopback address, "localhost" or
// a name under "localhost." (RFC 6761).
func (a Address) Loopback() bool {
	if a.IP.IsValid() {
		return a.IP.IsLoopback()
	}
	h := strings.ToLower(strings.TrimSuffix(a.Host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// String formats a in canonical form: the scheme, the host (IP when valid,
// an IPv6 address in brackets with its zone as "%25ZONE", else Host), the
// port, and for relay:// "/?id=" and the relay ID in its canonical text.
// For an Address from ParseAddress the result parses back to the same
// Address, length permitting.
func (a Address) String() string {
	var b strings.Builder
	b.Grow(MaxAddressLen)
	b.WriteString(a.Scheme)
	b.WriteString("://")
	switch {
	case a.IP.Is6():
		b.WriteByte('[')
		b.WriteString(a.IP.WithZone("").String())
		if z := a.IP.Zone(); z != "" {
			b.WriteString("%25")
			b.WriteString(z)
		}
		b.WriteByte(']')
	case a.IP.IsValid():
		b.WriteString(a.IP.String())
	default:
		b.WriteString(a.Host)
	}
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(int(a.Port)))
	if a.Scheme == SchemeRelay {
		b.WriteString("/?id=")
		b.WriteString(a.Relay.String())
	}
	return b.String()
}
