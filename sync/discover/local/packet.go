package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/sync/discover"
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
	MaxAddressLen = discover.MaxAddressLen
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

// ValidAddress reports (as nil) whether s is an address an announcement may
// carry: see discover.ParseAddress. Errors wrap both ErrMalformed and
// discover.ErrMalformed.
func ValidAddress(s string) error {
	if _, err := discover.ParseAddress(s); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// resolve returns the address s as heard from src, in canonical form, or
// false when it must be dropped: s is invalid, is a tcp:// address with an
// unspecified host heard from no valid source, names a loopback host while
// src is not loopback, is a link-local IPv6 address heard from a source
// that is not IPv6 link-local with a zone ParseAddress accepts (its own
// zone would mean nothing here), or its canonical form is longer than
// MaxAddressLen.
func resolve(s string, src netip.Addr) (string, bool) {
	a, err := discover.ParseAddress(s)
	if err != nil {
		return "", false
	}
	src = src.Unmap()
	srcZone := ""
	if src.Is6() && src.IsLinkLocalUnicast() {
		srcZone = src.Zone()
	}
	if a.Scheme == discover.SchemeTCP && a.Unspecified() {
		if !src.IsValid() {
			return "", false
		}
		a.Host, a.IP = "", src.WithZone(srcZone)
	}
	if a.Loopback() && !src.IsLoopback() {
		return "", false
	}
	if a.IP.Is6() && a.IP.IsLinkLocalUnicast() {
		if srcZone == "" {
			return "", false
		}
		a.IP = a.IP.WithZone(srcZone)
	} else {
		a.IP = a.IP.WithZone("")
	}
	out := a.String()
	if len(out) > MaxAddressLen { // the canonical form may be longer
		return "", false
	}
	if a.IP.Zone() != "" { // src's zone may be one ParseAddress refuses
		if _, err := discover.ParseAddress(out); err != nil {
			return "", false
		}
	}
	return out, true
}
