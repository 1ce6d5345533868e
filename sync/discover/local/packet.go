package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
)

// Wire limits; see local.proto.
const (
	// Magic starts every announcement datagram: "LSD1" read big endian.
	Magic uint32 = 0x4C53_4431
	// MaxPacketSize is the largest datagram sent or accepted, magic included.
	MaxPacketSize = 1024
	// MaxAddresses is the most addresses one announcement may carry.
	MaxAddresses = 16
	// MaxAddressLen is the longest address, in bytes, an announcement may carry.
	MaxAddressLen = 256
)

const magicLen = 4

// ErrMalformed is wrapped by every error about a datagram that breaks the
// wire format.
var ErrMalformed = errors.New("malformed announcement")

// ErrTooLarge is returned by MarshalBinary when an announcement would not
// fit in MaxPacketSize bytes.
var ErrTooLarge = errors.New("announcement too large")

// Announcement is one decoded datagram.
type Announcement struct {
	ID         crypt.DeviceID
	Addresses  []string // as sent: valid tcp:// or relay:// URLs, unresolved
	InstanceID int64
}

// MarshalBinary encodes a as a datagram. It fails with ErrMalformed when a
// would be rejected on receipt (too many or too long addresses) and with
// ErrTooLarge when the datagram would exceed MaxPacketSize. Addresses that
// are not valid URLs are sent anyway (receivers drop them); callers filter
// with ValidAddress first.
func (a Announcement) MarshalBinary() ([]byte, error) {
	if len(a.Addresses) > MaxAddresses {
		return nil, fmt.Errorf("encoding announcement: %w: %d addresses (limit %d)", ErrMalformed, len(a.Addresses), MaxAddresses)
	}
	for _, s := range a.Addresses {
		if len(s) > MaxAddressLen {
			return nil, fmt.Errorf("encoding announcement: %w: address of %d bytes (limit %d)", ErrMalformed, len(s), MaxAddressLen)
		}
	}
	msg := &Announce{Id: a.ID[:], Addresses: a.Addresses, InstanceId: a.InstanceID}
	b := binary.BigEndian.AppendUint32(make([]byte, 0, MaxPacketSize), Magic)
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(b, msg)
	if err != nil {
		return nil, fmt.Errorf("encoding announcement: %w", err)
	}
	if len(b) > MaxPacketSize {
		return nil, fmt.Errorf("encoding announcement: %w: %d bytes (limit %d)", ErrTooLarge, len(b), MaxPacketSize)
	}
	return b, nil
}

// ParseAnnouncement decodes a datagram. Breaking a wire limit is an error
// wrapping ErrMalformed; addresses that are not valid tcp:// or relay://
// URLs (see ValidAddress) are left out of the result, and the rest kept in
// order. The result may thus hold no address at all.
func ParseAnnouncement(b []byte) (Announcement, error) {
	if len(b) > MaxPacketSize {
		return Announcement{}, fmt.Errorf("%w: %d bytes (limit %d)", ErrMalformed, len(b), MaxPacketSize)
	}
	if len(b) < magicLen || binary.BigEndian.Uint32(b) != Magic {
		return Announcement{}, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	var msg Announce
	if err := proto.Unmarshal(b[magicLen:], &msg); err != nil {
		return Announcement{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var a Announcement
	if len(msg.Id) != len(a.ID) {
		return Announcement{}, fmt.Errorf("%w: device ID of %d bytes", ErrMalformed, len(msg.Id))
	}
	copy(a.ID[:], msg.Id)
	if len(msg.Addresses) > MaxAddresses {
		return Announcement{}, fmt.Errorf("%w: %d addresses (limit %d)", ErrMalformed, len(msg.Addresses), MaxAddresses)
	}
	for _, s := range msg.Addresses {
		if len(s) > MaxAddressLen {
			return Announcement{}, fmt.Errorf("%w: address of %d bytes (limit %d)", ErrMalformed, len(s), MaxAddressLen)
		}
	}
	for _, s := range msg.Addresses {
		if ValidAddress(s) == nil {
			a.Addresses = append(a.Addresses, s)
		}
	}
	a.InstanceID = msg.InstanceId
	return a, nil
}

// address is a parsed tcp:// or relay:// URL.
type address struct {
	scheme string
	host   string // without brackets or zone; "" if unspecified
	ip     netip.Addr
	port   string
	relay  crypt.DeviceID // relay:// only
}

// unspecified reports whether the host means "the datagram's source".
func (a address) unspecified() bool {
	return a.host == "" || (a.ip.IsValid() && a.ip.IsUnspecified())
}

// loopback reports whether the host is a loopback address or "localhost".
func (a address) loopback() bool {
	if a.ip.IsValid() {
		return a.ip.IsLoopback()
	}
	return strings.EqualFold(a.host, "localhost") || strings.HasSuffix(strings.ToLower(a.host), ".localhost")
}

// String formats a as a canonical URL.
func (a address) String() string {
	host := a.host
	if a.ip.IsValid() {
		host = a.ip.String()
	}
	u := url.URL{Scheme: a.scheme, Host: net.JoinHostPort(host, a.port)}
	if a.scheme == "relay" {
		u.Path = "/"
		u.RawQuery = url.Values{"id": {a.relay.String()}}.Encode()
	}
	return u.String()
}

// ValidAddress reports (as nil) whether s is an address an announcement may
// carry: tcp://HOST:PORT, or relay://HOST:PORT/?id=DEVICEID with a concrete
// host. HOST is an IP address (IPv6 in brackets, optionally with a zone) or
// a host name, or in tcp:// empty or unspecified; PORT is 1 to 65535.
// Errors wrap ErrMalformed.
func ValidAddress(s string) error {
	_, err := parseAddress(s)
	return err
}

func parseAddress(s string) (address, error) {
	if len(s) > MaxAddressLen {
		return address{}, fmt.Errorf("%w: address of %d bytes", ErrMalformed, len(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		return address{}, fmt.Errorf("%w: address: %w", ErrMalformed, err)
	}
	if u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return address{}, fmt.Errorf("%w: address %q: unexpected URL parts", ErrMalformed, s)
	}
	a := address{scheme: u.Scheme}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return address{}, fmt.Errorf("%w: address %q: %w", ErrMalformed, s, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 || port[0] == '0' {
		return address{}, fmt.Errorf("%w: address %q: bad port", ErrMalformed, s)
	}
	a.port = port
	if err := a.setHost(host); err != nil {
		return address{}, fmt.Errorf("%w: address %q: %w", ErrMalformed, s, err)
	}
	switch u.Scheme {
	case "tcp":
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery {
			return address{}, fmt.Errorf("%w: address %q: unexpected path or query", ErrMalformed, s)
		}
	case "relay":
		if a.unspecified() {
			return address{}, fmt.Errorf("%w: address %q: relay without a host", ErrMalformed, s)
		}
		if u.Path != "" && u.Path != "/" {
			return address{}, fmt.Errorf("%w: address %q: unexpected path", ErrMalformed, s)
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil || len(q) != 1 || len(q["id"]) != 1 {
			return address{}, fmt.Errorf("%w: address %q: want exactly the query id=RELAYDEVICEID", ErrMalformed, s)
		}
		if a.relay, err = crypt.ParseDeviceID(q["id"][0]); err != nil {
			return address{}, fmt.Errorf("%w: address %q: %w", ErrMalformed, s, err)
		}
	default:
		return address{}, fmt.Errorf("%w: address %q: scheme is neither tcp nor relay", ErrMalformed, s)
	}
	return a, nil
}

// setHost sets a's host from the host part of a URL.
func (a *address) setHost(host string) error {
	if host == "" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		a.ip, a.host = ip.Unmap(), host
		return nil
	}
	if !validHostName(host) {
		return fmt.Errorf("bad host %q", host)
	}
	a.host = strings.ToLower(host)
	return nil
}

// validHostName reports whether h is a DNS name: dot-separated labels of 1
// to 63 letters, digits, hyphens or underscores, not starting or ending
// with a hyphen, an optional final dot, at most 253 bytes.
func validHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}

// resolve returns the address s as heard from src, in canonical form, or
// false when it must be dropped: s is invalid, names a loopback host while
// src is not loopback, is a link-local IPv6 address heard from a source
// that is not IPv6 link-local (its zone would mean nothing here), or its
// canonical form is longer than MaxAddressLen.
func resolve(s string, src netip.Addr) (string, bool) {
	a, err := parseAddress(s)
	if err != nil {
		return "", false
	}
	src = src.Unmap()
	srcLinkLocal := src.Is6() && src.IsLinkLocalUnicast() && src.Zone() != ""
	if a.scheme == "tcp" && a.unspecified() {
		a.ip = src
		if !srcLinkLocal {
			a.ip = src.WithZone("")
		}
		a.host = a.ip.String()
	}
	if a.loopback() && !src.IsLoopback() {
		return "", false
	}
	if a.ip.Is6() && a.ip.IsLinkLocalUnicast() {
		if !srcLinkLocal {
			return "", false
		}
		a.ip = a.ip.WithZone(src.Zone())
	} else if a.ip.IsValid() {
		a.ip = a.ip.WithZone("")
	}
	out := a.String()
	if len(out) > MaxAddressLen { // the canonical form may be longer
		return "", false
	}
	return out, true
}
