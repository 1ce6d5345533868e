package global

import (
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
)

var testRelayID = crypt.DeviceID{1, 2, 3, 250}.String()

func TestValidateAddress(t *testing.T) {
	for addr, ok := range map[string]bool{
		"tcp://0.0.0.0:22100":                        true,
		"tcp://:22100":                               true,
		"tcp://[::]:22100":                           true,
		"tcp://[2001:db8::1]:22100":                  true,
		"tcp://host.example:22100":                   true,
		"tcp://192.0.2.1:22100/":                     true,
		"tcp://192.0.2.1:1":                          true,
		"tcp://192.0.2.1:65535":                      true,
		"relay://192.0.2.1:22067/?id=" + testRelayID: true,
		"relay://192.0.2.1:22067?id=" + testRelayID:  true,

		"tcp://192.0.2.1:0":                        false,
		"tcp://192.0.2.1:65536":                    false,
		"tcp://192.0.2.1:022100":                   false,
		"tcp://192.0.2.1:-1":                       false,
		"tcp://192.0.2.1":                          false,
		"tcp://192.0.2.1:22100/path":               false,
		"tcp://192.0.2.1:22100?x=1":                false,
		"tcp://192.0.2.1:22100?":                   false,
		"tcp://192.0.2.1:22100#frag":               false,
		"tcp://user@192.0.2.1:22100":               false,
		"tcp:192.0.2.1:22100":                      false,
		"tcp://192.0.2.1: 22100":                   false,
		"tcp://192.0.2.1:22100\n":                  false,
		"tcp://hé:1":                               false,
		"udp://192.0.2.1:22100":                    false,
		"TCP://192.0.2.1:22100":                    false,
		"192.0.2.1:22100":                          false,
		"":                                         false,
		"relay://192.0.2.1:22067/":                 false,
		"relay://192.0.2.1:22067/?id=XYZ":          false,
		"relay://0.0.0.0:22067/?id=" + testRelayID: false,
		"relay://:22067/?id=" + testRelayID:        false,
		"relay://192.0.2.1:22067/?id=" + testRelayID + "&id=" + testRelayID: false,
		"relay://relay.example:22067/?id=" + testRelayID + "&token=x":       false,
		"tcp://bad_host!:1":      false,
		"tcp://a..b:1":           false,
		"tcp://2130706433:22100": false,
	} {
		err := validateAddress(addr)
		if ok && err != nil {
			t.Errorf("%q: %v", addr, err)
		}
		if !ok && !errors.Is(err, ErrInvalidAnnouncement) {
			t.Errorf("%q: %v, want ErrInvalidAnnouncement", addr, err)
		}
	}
}

func TestResolveAddresses(t *testing.T) {
	relay := "relay://[::]:1/?id=" + testRelayID // kept as given: not a tcp:// address
	// Loopback addresses count only when announced from loopback.
	in := []string{"tcp://0.0.0.0:1", "tcp://:1", "tcp://[::]:2", "tcp://192.0.2.9:3", relay, "tcp://127.0.0.1:4", "tcp://localhost:5", "tcp://[::1]:6"}
	loop := []string{"tcp://127.0.0.1:4", "tcp://localhost:5", "tcp://[::1]:6"}
	for _, tc := range []struct {
		source netip.Addr
		want   []string
	}{
		{netip.MustParseAddr("127.0.0.1"), append([]string{"tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "tcp://192.0.2.9:3", relay}, loop...)},
		{netip.MustParseAddr("::ffff:127.0.0.1"), append([]string{"tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "tcp://192.0.2.9:3", relay}, loop...)},
		{netip.MustParseAddr("::ffff:198.51.100.4"), []string{"tcp://198.51.100.4:1", "tcp://198.51.100.4:2", "tcp://192.0.2.9:3", relay}},
		{netip.MustParseAddr("fe80::1%eth0"), []string{"tcp://[fe80::1]:1", "tcp://[fe80::1]:2", "tcp://192.0.2.9:3", relay}},
		{netip.Addr{}, []string{"tcp://192.0.2.9:3", relay}},
	} {
		if got := resolveAddresses(in, tc.source); !slices.Equal(got, tc.want) {
			t.Errorf("source %v: %q, want %q", tc.source, got, tc.want)
		}
	}
	for in, want := range map[string]netip.Addr{
		"127.0.0.1:5":         netip.MustParseAddr("127.0.0.1"),
		"[::ffff:10.0.0.1]:5": netip.MustParseAddr("10.0.0.1"),
		"[2001:db8::1]:5":     netip.MustParseAddr("2001:db8::1"),
		"pipe":                {},
		"":                    {},
	} {
		if got := remoteIP(in); got != want {
			t.Errorf("remoteIP(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestParseAnnouncementDuplicates(t *testing.T) {
	a, err := parseAnnouncement([]byte(`{"addresses": ["tcp://:1", "tcp://:1", "tcp://:2"], "future": {"x": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Addresses, []string{"tcp://:1", "tcp://:2"}) || !a.Device.IsZero() {
		t.Errorf("%+v", a)
	}
}

func TestParseLookup(t *testing.T) {
	addrs, seen, err := parseLookup([]byte(`{"addresses": ["tcp://192.0.2.1:1", "quic://192.0.2.1:1", "tcp://192.0.2.1:1"], "seen": "2030-01-02T03:04:05Z"}`))
	if err != nil || !slices.Equal(addrs, []string{"tcp://192.0.2.1:1"}) || !seen.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("%q %v %v", addrs, seen, err)
	}
	for _, bad := range []string{``, `[]`, `{"addresses": []}`, `{"addresses": [], "seen": "yesterday"}`, `{"addresses": 1, "seen": "2030-01-02T03:04:05Z"}`} {
		if _, _, err := parseLookup([]byte(bad)); !errors.Is(err, ErrServerResponse) {
			t.Errorf("%q: %v, want ErrServerResponse", bad, err)
		}
	}
}

// FuzzParseAnnouncement checks the server's parser of untrusted bytes: it
// never panics, everything it accepts obeys the limits, and what it accepts
// survives a round trip through the client's encoding unchanged.
func FuzzParseAnnouncement(f *testing.F) {
	for _, seed := range []string{
		`{"addresses": ["tcp://0.0.0.0:22100", "relay://192.0.2.1:22067/?id=` + testRelayID + `"]}`,
		`{"addresses": [], "device": "` + testRelayID + `"}`,
		`{"addresses": ["tcp://[::]:1", "tcp://:1"]}`,
		`{"addresses": null}`,
		`{"addresses": ["udp://x:1"]}`,
		`{}`, `[]`, ``, `{"addresses": ["` + strings.Repeat("a", 300) + `"]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := parseAnnouncement(body)
		if err != nil {
			if !errors.Is(err, ErrInvalidAnnouncement) {
				t.Fatalf("error %v does not wrap ErrInvalidAnnouncement", err)
			}
			return
		}
		if len(body) > MaxBodySize || len(a.Addresses) > MaxAddresses {
			t.Fatalf("accepted %d bytes with %d addresses", len(body), len(a.Addresses))
		}
		for _, addr := range a.Addresses {
			if len(addr) > MaxAddressLen || !(strings.HasPrefix(addr, "tcp://") || strings.HasPrefix(addr, "relay://")) {
				t.Fatalf("accepted address %q", addr)
			}
		}
		resolved := resolveAddresses(a.Addresses, netip.MustParseAddr("192.0.2.1"))
		for _, addr := range resolved {
			if err := validateAddress(addr); err != nil && len(addr) <= MaxAddressLen {
				t.Fatalf("resolved address %q is invalid: %v", addr, err)
			}
		}
		out := announcementBody{Addresses: a.Addresses}
		if !a.Device.IsZero() {
			out.Device = a.Device.String()
		}
		enc, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseAnnouncement(enc)
		if err != nil {
			t.Fatalf("re-encoded %q: %v", enc, err)
		}
		if !slices.Equal(again.Addresses, a.Addresses) || again.Device != a.Device {
			t.Fatalf("round trip: %+v, want %+v", again, a)
		}
	})
}

// FuzzParseLookup checks the client's parser of the server's answer.
func FuzzParseLookup(f *testing.F) {
	f.Add([]byte(`{"addresses": ["tcp://192.0.2.1:1"], "seen": "2030-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"addresses": [], "seen": "2030-01-02T03:04:05+02:00"}`))
	f.Add([]byte(`{"seen": 5}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		addrs, _, err := parseLookup(body)
		if err != nil {
			if !errors.Is(err, ErrServerResponse) {
				t.Fatalf("error %v does not wrap ErrServerResponse", err)
			}
			return
		}
		if len(addrs) > MaxAddresses {
			t.Fatalf("%d addresses", len(addrs))
		}
		for _, a := range addrs {
			if err := validateAddress(a); err != nil {
				t.Fatalf("returned invalid address %q: %v", a, err)
			}
		}
	})
}
