package global

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"lockstep/crypt"
)

// Limits of an announcement; see the package comment.
const (
	// MaxBodySize is the largest announcement body the server reads.
	MaxBodySize = 16 << 10
	// MaxAddresses is the most addresses one announcement may carry.
	MaxAddresses = 16
	// MaxAddressLen is the longest address, in bytes, as announced.
	MaxAddressLen = 256
)

// Address schemes a device may announce.
const (
	schemeTCP   = "tcp"
	schemeRelay = "relay"
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

// validateAddress checks one announced address against the wire rules;
// errors wrap ErrInvalidAnnouncement and quote (a prefix of) the address.
func validateAddress(addr string) error {
	if len(addr) > MaxAddressLen {
		return fmt.Errorf("%w: address %.32q... is %d bytes, at most %d allowed", ErrInvalidAnnouncement, addr, len(addr), MaxAddressLen)
	}
	for i := 0; i < len(addr); i++ {
		if c := addr[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: address %q has a space, control or non-ASCII byte", ErrInvalidAnnouncement, addr)
		}
	}
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("%w: address %q: %v", ErrInvalidAnnouncement, addr, err)
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: address %q: %s", ErrInvalidAnnouncement, addr, why)
	}
	if !strings.HasPrefix(addr, u.Scheme+"://") {
		return bad("scheme must be tcp:// or relay://, in lower case")
	}
	if u.Opaque != "" || u.User != nil || u.Fragment != "" || u.RawFragment != "" || strings.Contains(addr, "#") {
		return bad("must be SCHEME://HOST:PORT")
	}
	if u.Path != "" && u.Path != "/" {
		return bad("must have no path")
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return bad("must have HOST:PORT")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 || port[0] == '0' {
		return bad("port must be 1-65535")
	}
	switch u.Scheme {
	case schemeTCP:
		if u.RawQuery != "" || strings.Contains(addr, "?") {
			return bad("a tcp:// address has no query")
		}
	case schemeRelay:
		if unspecifiedHost(host) {
			return bad("a relay:// address needs the relay's host")
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil || len(q["id"]) != 1 {
			return bad("a relay:// address needs one ?id=RELAYDEVICEID")
		}
		if _, err := crypt.ParseDeviceID(q.Get("id")); err != nil {
			return bad(err.Error())
		}
	default:
		return bad("scheme must be tcp or relay")
	}
	return nil
}

// unspecifiedHost reports whether host means "the sender's address": empty,
// 0.0.0.0 or ::.
func unspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

// resolveAddresses returns valid addresses with the unspecified host of every
// tcp:// address replaced by source, without duplicates. An invalid source
// leaves such addresses out.
func resolveAddresses(addrs []string, source netip.Addr) []string {
	out := make([]string, 0, len(addrs))
	for _, addr := range addrs {
		u, err := url.Parse(addr)
		if err != nil || u.Scheme != schemeTCP {
			out = appendUnique(out, addr)
			continue
		}
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || !unspecifiedHost(host) {
			out = appendUnique(out, addr)
			continue
		}
		if !source.IsValid() {
			continue
		}
		ip := source.Unmap().WithZone("")
		out = appendUnique(out, schemeTCP+"://"+net.JoinHostPort(ip.String(), port))
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
