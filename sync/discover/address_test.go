package discover

import (
	"crypto/rand"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"lockstep/crypt"
)

// testRelay is a fixed non-zero relay ID.
var testRelay = crypt.DeviceID{1, 2, 3, 250}

// hostOfLen returns a valid host name of n bytes (n >= 1): labels of 63
// letters joined by dots.
func hostOfLen(n int) string {
	b := []byte(strings.Repeat("a", n))
	for i := 63; i < n-1; i += 64 {
		b[i] = '.'
	}
	return string(b)
}

// addrOfLen returns a valid tcp:// address of n bytes (n >= 9).
func addrOfLen(n int) string {
	return "tcp://" + hostOfLen(n-len("tcp://:1")) + ":1"
}

func TestParseAddress(t *testing.T) {
	id := testRelay.String()
	ll := netip.MustParseAddr("fe80::1%eth0")
	cases := []struct {
		in   string
		want Address
	}{
		{"tcp://192.0.2.1:22100", Address{Scheme: SchemeTCP, IP: netip.MustParseAddr("192.0.2.1"), Port: 22100}},
		{"tcp://192.0.2.1:22100/", Address{Scheme: SchemeTCP, IP: netip.MustParseAddr("192.0.2.1"), Port: 22100}},
		{"tcp://:1", Address{Scheme: SchemeTCP, Port: 1}},
		{"tcp://0.0.0.0:65535", Address{Scheme: SchemeTCP, IP: netip.IPv4Unspecified(), Port: 65535}},
		{"tcp://[::]:2", Address{Scheme: SchemeTCP, IP: netip.IPv6Unspecified(), Port: 2}},
		{"tcp://[2001:DB8::1]:3", Address{Scheme: SchemeTCP, IP: netip.MustParseAddr("2001:db8::1"), Port: 3}},
		{"tcp://[::ffff:192.0.2.9]:4", Address{Scheme: SchemeTCP, IP: netip.MustParseAddr("192.0.2.9"), Port: 4}},
		{"tcp://[::ffff:192.0.2.9%25eth0]:4", Address{Scheme: SchemeTCP, IP: netip.MustParseAddr("192.0.2.9"), Port: 4}},
		{"tcp://[fe80::1%25eth0]:5", Address{Scheme: SchemeTCP, IP: ll, Port: 5}},
		{"tcp://[fe80::1%25a.b_c~d-1]:5", Address{Scheme: SchemeTCP, IP: ll.WithZone("a.b_c~d-1"), Port: 5}},
		{"tcp://NAS.Example:6", Address{Scheme: SchemeTCP, Host: "nas.example", Port: 6}},
		{"tcp://nas.example.:6", Address{Scheme: SchemeTCP, Host: "nas.example.", Port: 6}},
		{"tcp://_srv.host-1.example:6", Address{Scheme: SchemeTCP, Host: "_srv.host-1.example", Port: 6}},
		{"tcp://1.2.3.example:7", Address{Scheme: SchemeTCP, Host: "1.2.3.example", Port: 7}},
		{"tcp://0xg:7", Address{Scheme: SchemeTCP, Host: "0xg", Port: 7}},
		{"relay://192.0.2.7:22067/?id=" + id, Address{Scheme: SchemeRelay, IP: netip.MustParseAddr("192.0.2.7"), Port: 22067, Relay: testRelay}},
		{"relay://relay.example:22067?id=" + strings.ToLower(strings.ReplaceAll(id, "-", "")), Address{Scheme: SchemeRelay, Host: "relay.example", Port: 22067, Relay: testRelay}},
		{"relay://[::1]:1/?id=" + id, Address{Scheme: SchemeRelay, IP: netip.IPv6Loopback(), Port: 1, Relay: testRelay}},
	}
	for _, c := range cases {
		got, err := ParseAddress(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseAddress(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParseAddressRejects(t *testing.T) {
	id := testRelay.String()
	for _, s := range []string{
		"", "tcp://", "tcp://192.0.2.1", "tcp://192.0.2.1:", "192.0.2.1:22100", "tcp:192.0.2.1:1", "tcp:/192.0.2.1:1",
		"TCP://192.0.2.1:1", "Relay://192.0.2.1:1/?id=" + id, "udp://192.0.2.1:1", "https://192.0.2.1:443",
		// ports
		"tcp://192.0.2.1:0", "tcp://192.0.2.1:65536", "tcp://192.0.2.1:022100", "tcp://192.0.2.1:-1", "tcp://192.0.2.1:+1",
		"tcp://192.0.2.1:x", "tcp://192.0.2.1:99999999999999999999",
		// bytes
		"tcp://192.0.2.1: 22100", "tcp://192.0.2.1:22100\n", "tcp://hé:1", "tcp://a\x00:1", "tcp://a\x7f:1",
		// URL parts
		"tcp://u@192.0.2.1:1", "tcp://@192.0.2.1:1", "tcp://192.0.2.1:1/path", "tcp://192.0.2.1:1//", "tcp://192.0.2.1:1?",
		"tcp://192.0.2.1:1?x=1", "tcp://192.0.2.1:1#", "tcp://192.0.2.1:1#f", "tcp://192.0.2.1:1/#",
		// hosts
		"tcp://bad_host!:1", "tcp://-bad.example:1", "tcp://bad-.example:1", "tcp://a..b:1", "tcp://.a:1", "tcp://.:1",
		"tcp://a%41:1", "tcp://" + strings.Repeat("a", 64) + ":1", "tcp://::1:1", "tcp://[::1:1", "tcp://::1]:1",
		"tcp://[192.0.2.1]:1", "tcp://[]:1", "tcp://[::1]", "tcp://[::1]x:1", "tcp://[fe80::1%eth0]:1",
		"tcp://[fe80::1%25]:1", "tcp://[fe80::1%25eth%200]:1", "tcp://[fe80::1%25%65th0]:1", "tcp://[fe80::1%25eth/0]:1",
		// names a resolver would read as IPv4
		"tcp://0177.0.0.1:1", "tcp://2130706433:1", "tcp://0x7f000001:1", "tcp://0X7F.1:1", "tcp://127.1:1",
		"tcp://a.123:1", "tcp://a.0x:1", "tcp://192.0.2.1.:1", "tcp://01.2.3.4:1",
		// relays
		"relay://192.0.2.7:22067", "relay://192.0.2.7:22067/", "relay://192.0.2.7:22067/?", "relay://192.0.2.7:22067/?id=",
		"relay://192.0.2.7:22067/?id=XYZ", "relay://0.0.0.0:22067/?id=" + id, "relay://[::]:22067/?id=" + id,
		"relay://:22067/?id=" + id, "relay://192.0.2.7:22067/?id=" + id + "&id=" + id, "relay://192.0.2.7:22067/?id=" + id + "&x=1",
		"relay://192.0.2.7:22067/?x=1&id=" + id, "relay://192.0.2.7:22067/x?id=" + id, "relay://192.0.2.7:22067/?ID=" + id,
		"relay://192.0.2.7:22067/?id=" + strings.ReplaceAll(id, "-", "+"), "relay://192.0.2.7:22067/?id=%41" + id[1:],
		"relay://192.0.2.7:22067/?id=" + crypt.DeviceID{}.String(), "relay://192.0.2.7:22067/?id=" + id + "#",
		addrOfLen(MaxAddressLen + 1),
	} {
		a, err := ParseAddress(s)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseAddress(%q) = %+v, %v; want ErrMalformed", s, a, err)
		}
	}
}

// TestParseAddressLimits checks the boundaries n-1, n, n+1 of the length,
// label and port limits.
func TestParseAddressLimits(t *testing.T) {
	for n, ok := range map[int]bool{MaxAddressLen - 1: true, MaxAddressLen: true, MaxAddressLen + 1: false} {
		if _, err := ParseAddress(addrOfLen(n)); (err == nil) != ok {
			t.Errorf("%d-byte address: %v", n, err)
		}
	}
	for n, ok := range map[int]bool{62: true, 63: true, 64: false} {
		s := "tcp://" + strings.Repeat("b", n) + ".example:1"
		if _, err := ParseAddress(s); (err == nil) != ok {
			t.Errorf("%d-byte label: %v", n, err)
		}
	}
	for port, ok := range map[string]bool{"0": false, "1": true, "2": true, "65534": true, "65535": true, "65536": false} {
		if _, err := ParseAddress("tcp://192.0.2.1:" + port); (err == nil) != ok {
			t.Errorf("port %s: %v", port, err)
		}
	}
	// Names are capped at 253 bytes (254 with the final dot); no address
	// within MaxAddressLen reaches that, so check the name rule directly.
	for n, ok := range map[int]bool{252: true, 253: true, 254: false} {
		if got := validHostName(hostOfLen(n)); got != ok {
			t.Errorf("%d-byte name: %v", n, got)
		}
		if got := validHostName(hostOfLen(n) + "."); got != ok {
			t.Errorf("%d-byte name with final dot: %v", n, got)
		}
	}
}

func TestAddressPredicates(t *testing.T) {
	id := testRelay.String()
	for s, want := range map[string][2]bool{ // {unspecified, loopback}
		"tcp://:1":                   {true, false},
		"tcp://0.0.0.0:1":            {true, false},
		"tcp://[::]:1":               {true, false},
		"tcp://[::ffff:0.0.0.0]:1":   {true, false},
		"tcp://192.0.2.1:1":          {false, false},
		"tcp://127.0.0.1:1":          {false, true},
		"tcp://127.9.9.9:1":          {false, true},
		"tcp://[::1]:1":              {false, true},
		"tcp://[::ffff:127.0.0.1]:1": {false, true},
		"tcp://localhost:1":          {false, true},
		"tcp://LocalHost.:1":         {false, true},
		"tcp://db.localhost:1":       {false, true},
		"tcp://notlocalhost:1":       {false, false},
		"tcp://localhost.example:1":  {false, false},
		"relay://[::1]:1/?id=" + id:  {false, true},
	} {
		a, err := ParseAddress(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]bool{a.Unspecified(), a.Loopback()}; got != want {
			t.Errorf("%q: unspecified, loopback = %v, want %v", s, got, want)
		}
	}
}

func TestAddressString(t *testing.T) {
	id := testRelay.String()
	for in, want := range map[string]string{
		"tcp://192.0.2.1:22100/":                     "tcp://192.0.2.1:22100",
		"tcp://:1":                                   "tcp://:1",
		"tcp://[::]:1":                               "tcp://[::]:1",
		"tcp://[2001:DB8:0::1]:1":                    "tcp://[2001:db8::1]:1",
		"tcp://[::ffff:192.0.2.9]:1":                 "tcp://192.0.2.9:1",
		"tcp://[fe80::1%25eth0]:1":                   "tcp://[fe80::1%25eth0]:1",
		"tcp://NAS.Example.:1":                       "tcp://nas.example.:1",
		"relay://192.0.2.7:22067?id=" + id:           "relay://192.0.2.7:22067/?id=" + id,
		"relay://[::1]:9/?id=" + strings.ToLower(id): "relay://[::1]:9/?id=" + id,
	} {
		a, err := ParseAddress(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.String(); got != want {
			t.Errorf("%q: String() = %q, want %q", in, got, want)
		}
	}
	var id2 crypt.DeviceID
	if _, err := rand.Read(id2[:]); err != nil {
		t.Fatal(err)
	}
	a := Address{Scheme: SchemeRelay, IP: netip.MustParseAddr("fe80::7%wlan0"), Port: 80, Relay: id2}
	if got, err := ParseAddress(a.String()); err != nil || got != a {
		t.Errorf("built %+v: String %q parses to %+v, %v", a, a.String(), got, err)
	}
}

// FuzzParseAddress checks the shared parser of announced addresses: it
// never panics, errors wrap ErrMalformed, what it accepts is short
// printable ASCII of a known scheme, and the canonical form is a fixed
// point that parses back to the same Address.
func FuzzParseAddress(f *testing.F) {
	id := testRelay.String()
	for _, seed := range []string{
		"tcp://192.0.2.1:22100", "tcp://:1", "tcp://[::]:2/", "tcp://[fe80::1%25eth0]:3", "tcp://[::ffff:10.0.0.1]:4",
		"tcp://NAS.example.:5", "tcp://0x7f.1:6", "tcp://u@h:1", "tcp://h:1#f", "udp://h:1", "TCP://h:1",
		"relay://192.0.2.7:22067/?id=" + id, "relay://r.example:1?id=" + strings.ToLower(strings.ReplaceAll(id, "-", "")),
		"relay://r:1/?id=" + id + "&x=1", "relay://[::]:1/?id=" + id, addrOfLen(MaxAddressLen), addrOfLen(MaxAddressLen + 1),
		"", "tcp://[", "tcp://]:1", "tcp://[::1%25]:1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(s) > MaxAddressLen || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			t.Fatalf("accepted %q", s)
		}
		if a.Port == 0 || (a.Host != "" && a.IP.IsValid()) || a.IP.Is4In6() {
			t.Fatalf("%q: bad fields %+v", s, a)
		}
		switch a.Scheme {
		case SchemeTCP:
			if !a.Relay.IsZero() {
				t.Fatalf("%q: tcp:// with relay %v", s, a.Relay)
			}
		case SchemeRelay:
			if a.Relay.IsZero() || a.Unspecified() {
				t.Fatalf("%q: relay:// without host or ID: %+v", s, a)
			}
		default:
			t.Fatalf("%q: scheme %q", s, a.Scheme)
		}
		out := a.String()
		if len(out) > MaxAddressLen {
			if a.Scheme != SchemeRelay {
				t.Fatalf("%q: canonical %q grew", s, out)
			}
			return
		}
		again, err := ParseAddress(out)
		if err != nil || again != a {
			t.Fatalf("%q: canonical %q parses to %+v, %v; want %+v", s, out, again, err, a)
		}
		if again.String() != out {
			t.Fatalf("%q: canonical %q is not a fixed point: %q", s, out, again.String())
		}
	})
}

func BenchmarkParseAddress(b *testing.B) {
	for name, s := range map[string]string{
		"ipv4":  "tcp://0.0.0.0:22100",
		"zone":  "tcp://[fe80::1%25eth0]:22100",
		"relay": "relay://relay.example:22067/?id=" + testRelay.String(),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				a, err := ParseAddress(s)
				if err != nil {
					b.Fatal(err)
				}
				_ = a.String()
			}
		})
	}
}
