package local

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
)

// FuzzParse checks that no datagram makes the decoder panic, that every
// accepted announcement re-encodes within the limits and decodes to the
// same value, and that every address it resolves is itself valid.
func FuzzParse(f *testing.F) {
	id := randomID(f)
	relay := "relay://192.0.2.7:22067/?id=" + randomID(f).String()
	seeds := []Announcement{
		{ID: id, Addresses: []string{"tcp://0.0.0.0:22100"}, InstanceID: 1},
		{ID: id, Addresses: []string{"tcp://[fe80::1%25eth0]:22100", relay, "tcp://nas.example:1"}, InstanceID: -1},
		{ID: id},
	}
	for _, a := range seeds {
		b, err := a.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(packetOfLen(f, MaxPacketSize))
	f.Add(packetOfLen(f, MaxPacketSize+1))
	f.Add(badUTF8(f, id))
	f.Add([]byte("LSD1"))
	f.Add([]byte{})
	sources := []netip.Addr{loopback, netip.MustParseAddr("192.0.2.50"), netip.MustParseAddr("fe80::2%eth0")}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAnnouncement(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(b) > MaxPacketSize || len(a.Addresses) > MaxAddresses {
			t.Fatalf("accepted %d bytes with %d addresses", len(b), len(a.Addresses))
		}
		enc, err := a.MarshalBinary()
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", a, err)
		}
		again, err := ParseAnnouncement(enc)
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if again.ID != a.ID || again.InstanceID != a.InstanceID || !slices.Equal(again.Addresses, a.Addresses) {
			t.Fatalf("round trip: %+v became %+v", a, again)
		}
		for _, s := range a.Addresses {
			if err := ValidAddress(s); err != nil {
				t.Fatalf("kept invalid address %q: %v", s, err)
			}
			for _, src := range sources {
				if r, ok := resolve(s, src); ok {
					if err := ValidAddress(r); err != nil {
						t.Fatalf("resolve(%q, %v) = invalid %q: %v", s, src, r, err)
					}
				}
			}
		}
	})
}
