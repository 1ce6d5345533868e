package discover

import (
	"net/netip"
	"testing"
)

// TestSource: an IPv4 address is its own source, IPv6 addresses count by
// /64, an IPv4-mapped address as IPv4; what is not IP is one source.
func TestSource(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.1:5":                 "192.0.2.1/32",
		"[::ffff:192.0.2.1]:5":        "192.0.2.1/32",
		"[2001:db8:1:2:3:4:5:6]:5":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:5":    "2001:db8:1:2::/64",
		"[fe80::1%eth0]:5":            "fe80::/64",
		"[2001:db8:1:3::1]:22000":     "2001:db8:1:3::/64",
		"not an address":              "invalid Prefix",
		"relay://192.0.2.1:22067/?id": "invalid Prefix",
	} {
		if got := SourceOf(stringAddr(addr)).String(); got != want {
			t.Errorf("SourceOf(%s) = %s, want %s", addr, got, want)
		}
	}
	if got := Source(netip.Addr{}); got.IsValid() {
		t.Errorf("Source of the zero Addr = %s, want the zero Prefix", got)
	}
}

// stringAddr is a net.Addr of any text.
type stringAddr string

func (a stringAddr) Network() string { return "tcp" }
func (a stringAddr) String() string  { return string(a) }
