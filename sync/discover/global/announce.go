package global

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"lockstep/crypt"
	"lockstep/sync/discover"
)

// Limits of an announcement; see the package comment.
const (
	// MaxBodySize is the largest announcement body the server reads.
	MaxBodySize = 16 << 10
	// MaxAddresses is the most addresses one announcement may carry.
	MaxAddresses = 16
	// MaxAddressLen is the longest address, in bytes, as announced.
	MaxAddressLen = discover.MaxAddressLen
)

// Sentinel errors. Errors from this package wrap one of them (or a
// transport error) so callers decide with errors.Is.
var (
	// ErrNotFound: the discovery server has no live entry for the device.
	ErrNotFound = errors.New("device not found")

	// ErrInvalidAnnouncement: an announcement body or one of its addresses
	// breaks the wire rules. The server answers 400.
	ErrInvalidAnnouncement = errors.New("invalid announcement")

	// ErrForeignDevice: an announcement names a device other than the one
	// whose certificate made the request. The server answers 403.
	ErrForeignDevice = errors.New("a device can only announce its own addresses")

	// ErrServerURL: a discovery server URL is malformed or lacks ?id=.
	ErrServerURL = errors.New("invalid discovery server URL")

	// ErrWrongServer: the discovery server presented a certificate of
	// another device than the one the URL names.
	ErrWrongServer = errors.New("discovery server has the wrong device ID")

	// ErrServerResponse: the discovery server answered with an unexpected
	// status or a malformed body.
	ErrServerResponse = errors.New("unexpected discovery server response")
)

// announcementBody is the JSON of POST /.
type announcementBody struct {
	Addresses []string `json:"addresses"`
	Device    string   `json:"device,omitempty"`
}

// lookupBody is the JSON of a 200 answer to GET /?device=ID.
type lookupBody struct {
	Addresses []string `json:"addresses"`
	Seen      string   `json:"seen"`
}

// errorBody is the JSON of every 4xx/5xx answer.
type errorBody struct {
	Error string `json:"error"`
}

// announcement is a validated announcement body.
type announcement struct {
	// Addresses are valid, as announced, without duplicates.
	Addresses []string
	// Device is the device the body names, zero when it names none.
	Device crypt.DeviceID
}

// parseAnnouncement decodes and validates an announcement body. Every error
// wraps ErrInvalidAnnouncement. It is the server's parser of untrusted bytes.
func parseAnnouncement(body []byte) (announcement, error) {
	if len(body) > MaxBodySize {
		return announcement{}, fmt.Errorf("%w: body larger than %d bytes", ErrInvalidAnnouncement, MaxBodySize)
	}
	var b announcementBody
	if err := json.Unmarshal(body, &b); err != nil {
		return announcement{}, fmt.Errorf("%w: %v", ErrInvalidAnnouncement, err)
	}
	if b.Addresses == nil {
		return announcement{}, fmt.Errorf("%w: no \"addresses\" list", ErrInvalidAnnouncement)
	}
	if len(b.Addresses) > MaxAddresses {
		return announcement{}, fmt.Errorf("%w: %d addresses, at most %d allowed", ErrInvalidAnnouncement, len(b.Addresses), MaxAddresses)
	}
	var a announcement
	if b.Device != "" {
		id, err := crypt.ParseDeviceID(b.Device)
		if err != nil {
			return announcement{}, fmt.Errorf("%w: device: %w", ErrInvalidAnnouncement, err)
		}
		a.Device = id
	}
	a.Addresses = make([]string, 0, len(b.Addresses))
	for _, addr := range b.Addresses {
		if err := validateAddress(addr); err != nil {
			return announcement{}, err
		}
		a.Addresses = appendUnique(a.Addresses, addr)
	}
	return a, nil
}

// validateAddress checks one announced address against the wire rules of
// discover.ParseAddress; errors wrap ErrInvalidAnnouncement and
// discover.ErrMalformed, and quote (a prefix of) the address.
func validateAddress(addr string) error {
	if _, err := discover.ParseAddress(addr); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidAnnouncement, err)
	}
	return nil
}

// resolveAddresses returns addrs with the unspecified host of every valid
// tcp:// address replaced by source, without duplicates; all other
// addresses are kept as given, except loopback ones announced from
// elsewhere than loopback (a node listening on 127.0.0.1 would send every
// device that looks it up to dial itself). An invalid source leaves the
// unspecified ones out.
func resolveAddresses(addrs []string, source netip.Addr) []string {
	out := make([]string, 0, len(addrs))
	for _, s := range addrs {
		a, err := discover.ParseAddress(s)
		if err == nil && a.Scheme == discover.SchemeTCP && a.Loopback() && !source.Unmap().IsLoopback() {
			continue
		}
		if err != nil || a.Scheme != discover.SchemeTCP || !a.Unspecified() {
			out = appendUnique(out, s)
			continue
		}
		if !source.IsValid() {
			continue
		}
		a.IP = source.Unmap().WithZone("")
		out = appendUnique(out, a.String())
	}
	return out
}

// parseLookup decodes a 200 answer to a lookup. Addresses that break the
// wire rules (perhaps a scheme of a newer version) are left out; a malformed
// body or seen time is an error wrapping ErrServerResponse. It is the
// client's parser of untrusted bytes.
func parseLookup(body []byte) (addrs []string, seen time.Time, err error) {
	var b lookupBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: lookup: %v", ErrServerResponse, err)
	}
	seen, err = time.Parse(time.RFC3339, b.Seen)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: lookup: seen: %v", ErrServerResponse, err)
	}
	for _, a := range b.Addresses {
		if len(addrs) == MaxAddresses {
			break
		}
		if validateAddress(a) == nil {
			addrs = appendUnique(addrs, a)
		}
	}
	return addrs, seen, nil
}

// appendUnique appends s to list unless list holds it already.
func appendUnique(list []string, s string) []string {
	for _, have := range list {
		if have == s {
			return list
		}
	}
	return append(list, s)
}
