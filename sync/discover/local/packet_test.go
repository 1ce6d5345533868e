package local

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/sync/discover"
)

// rawPacket encodes msg behind the magic without any check.
func rawPacket(t testing.TB, msg *Announce) []byte {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, Magic), b...)
}

// badUTF8 returns a datagram whose address is not UTF-8, which
// proto.Marshal refuses to build.
func badUTF8(t testing.TB, id crypt.DeviceID) []byte {
	b := rawPacket(t, &Announce{Id: id[:]})
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendString(b, "tcp://\xff:1")
}

// hostOfLen returns a valid host name of n bytes (n >= 1).
func hostOfLen(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
		if i%64 == 63 && i != n-1 {
			b[i] = '.'
		}
	}
	return string(b)
}

// addrOfLen returns a valid tcp:// address of n bytes (9 <= n <= 261).
func addrOfLen(n int) string {
	return "tcp://" + hostOfLen(n-len("tcp://:1")) + ":1"
}

// packetOfLen returns a datagram of exactly n bytes that is valid apart
// from its size.
func packetOfLen(t testing.TB, n int) []byte {
	t.Helper()
	id := randomID(t)
	full := []string{addrOfLen(MaxAddressLen), addrOfLen(MaxAddressLen), addrOfLen(MaxAddressLen)}
	for _, inst := range []int64{1, 300} {
		for l := 9; l <= MaxAddressLen; l++ {
			p := rawPacket(t, &Announce{Id: id[:], Addresses: append(slices.Clone(full), addrOfLen(l)), InstanceId: inst})
			if len(p) == n {
				return p
			}
		}
	}
	t.Fatalf("cannot build a %d-byte packet", n)
	return nil
}

func TestRoundTrip(t *testing.T) {
	relay := "relay://192.0.2.7:22067/?id=" + randomID(t).String()
	a := Announcement{ID: randomID(t), Addresses: []string{"tcp://0.0.0.0:22100", "tcp://[2001:db8::1]:22100", relay}, InstanceID: -5}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(b); got != 0x4C534431 || string(b[:4]) != "LSD1" {
		t.Fatalf("magic %x", got)
	}
	got, err := ParseAnnouncement(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != a.ID || got.InstanceID != a.InstanceID || !slices.Equal(got.Addresses, a.Addresses) {
		t.Fatalf("round trip: got %+v, want %+v", got, a)
	}
}

func TestParseLimits(t *testing.T) {
	id := randomID(t)
	addrs := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "tcp://192.0.2.1:22100"
		}
		return out
	}
	cases := map[string]struct {
		pkt []byte
		ok  bool
	}{
		"packet 1023":  {packetOfLen(t, MaxPacketSize-1), true},
		"packet 1024":  {packetOfLen(t, MaxPacketSize), true},
		"packet 1025":  {packetOfLen(t, MaxPacketSize+1), false},
		"id 31":        {rawPacket(t, &Announce{Id: id[:31], Addresses: addrs(1)}), false},
		"id 32":        {rawPacket(t, &Announce{Id: id[:], Addresses: addrs(1)}), true},
		"id 33":        {rawPacket(t, &Announce{Id: append(id[:], 0), Addresses: addrs(1)}), false},
		"no id":        {rawPacket(t, &Announce{Addresses: addrs(1)}), false},
		"15 addresses": {rawPacket(t, &Announce{Id: id[:], Addresses: addrs(15)}), true},
		"16 addresses": {rawPacket(t, &Announce{Id: id[:], Addresses: addrs(16)}), true},
		"17 addresses": {rawPacket(t, &Announce{Id: id[:], Addresses: addrs(17)}), false},
		"address 255":  {rawPacket(t, &Announce{Id: id[:], Addresses: []string{addrOfLen(255)}}), true},
		"address 256":  {rawPacket(t, &Announce{Id: id[:], Addresses: []string{addrOfLen(256)}}), true},
		"address 257":  {rawPacket(t, &Announce{Id: id[:], Addresses: []string{addrOfLen(257)}}), false},
		"empty":        {nil, false},
		"magic only":   {binary.BigEndian.AppendUint32(nil, Magic), false},
		"short magic":  {[]byte("LSD"), false},
		"wrong magic":  {append([]byte("LSD2"), rawPacket(t, &Announce{Id: id[:]})[4:]...), false},
		"bad protobuf": {append(binary.BigEndian.AppendUint32(nil, Magic), 0x0a, 0x20, 1, 2), false},
		"bad utf-8":    {badUTF8(t, id), false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseAnnouncement(c.pkt)
			if c.ok && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if !c.ok && !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestParseDropsBadAddresses(t *testing.T) {
	id := randomID(t)
	p := rawPacket(t, &Announce{Id: id[:], InstanceId: 7, Addresses: []string{
		"udp://192.0.2.1:22100", "tcp://192.0.2.1:22100", "tcp://192.0.2.1", "relay://192.0.2.9:22067/",
	}})
	a, err := ParseAnnouncement(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tcp://192.0.2.1:22100"}; !slices.Equal(a.Addresses, want) || a.ID != id || a.InstanceID != 7 {
		t.Fatalf("got %+v, want addresses %q", a, want)
	}
}

func TestMarshalLimits(t *testing.T) {
	id := randomID(t)
	many := make([]string, MaxAddresses+1)
	for i := range many {
		many[i] = "tcp://:1"
	}
	if _, err := (Announcement{ID: id, Addresses: many[:MaxAddresses]}).MarshalBinary(); err != nil {
		t.Fatalf("16 addresses: %v", err)
	}
	if _, err := (Announcement{ID: id, Addresses: many}).MarshalBinary(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("17 addresses: got %v", err)
	}
	if _, err := (Announcement{ID: id, Addresses: []string{addrOfLen(257)}}).MarshalBinary(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("257-byte address: got %v", err)
	}
	big := []string{addrOfLen(256), addrOfLen(256), addrOfLen(256), addrOfLen(256)}
	if _, err := (Announcement{ID: id, Addresses: big}).MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized packet: got %v", err)
	}
}

func TestValidAddress(t *testing.T) {
	relayID := randomID(t).String()
	good := []string{
		"tcp://192.0.2.1:22100", "tcp://0.0.0.0:22100", "tcp://:22100", "tcp://[::]:1",
		"tcp://[2001:db8::1]:65535", "tcp://[fe80::1%25eth0]:22100", "tcp://nas.example:22100",
		"tcp://192.0.2.1:22100/", "tcp://localhost:22100",
		"relay://192.0.2.7:22067/?id=" + relayID, "relay://relay.example:22067?id=" + relayID,
		"relay://192.0.2.7:22067/?id=" + strings.ToLower(strings.ReplaceAll(relayID, "-", "")),
	}
	bad := []string{
		"", "tcp://", "tcp://192.0.2.1", "tcp://192.0.2.1:0", "tcp://192.0.2.1:65536", "tcp://192.0.2.1:022100",
		"tcp://192.0.2.1:x", "udp://192.0.2.1:22100", "https://192.0.2.1:443", "tcp://u@192.0.2.1:1",
		"tcp://192.0.2.1:1/path", "tcp://192.0.2.1:1?id=x", "tcp://192.0.2.1:1#f", "tcp:192.0.2.1:1",
		"tcp://bad_host!:1", "tcp://-bad.example:1", "tcp://a..b:1", "192.0.2.1:22100",
		"relay://192.0.2.7:22067/", "relay://0.0.0.0:22067/?id=" + relayID, "relay://:22067/?id=" + relayID,
		"relay://192.0.2.7:22067/?id=NOTANID", "relay://192.0.2.7:22067/?id=" + relayID + "&x=1",
		"relay://192.0.2.7:22067/?id=" + relayID + "&id=" + relayID, "relay://192.0.2.7:22067/x?id=" + relayID,
		"TCP://192.0.2.1:22100", "tcp://192.0.2.1:1#", "tcp://0177.0.0.1:1",
		"relay://192.0.2.7:22067/?id=" + strings.ReplaceAll(relayID, "-", "+"),
		addrOfLen(257),
	}
	for _, s := range good {
		if err := ValidAddress(s); err != nil {
			t.Errorf("ValidAddress(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidAddress(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("ValidAddress(%q) = %v, want ErrMalformed", s, err)
		}
	}
	if err := ValidAddress(addrOfLen(256)); err != nil {
		t.Errorf("256-byte address: %v", err)
	}
}

func TestResolve(t *testing.T) {
	relayID := randomID(t)
	relay := "relay://192.0.2.7:22067/?id=" + relayID.String()
	lan := netip.MustParseAddr("192.0.2.50")
	ll := netip.MustParseAddr("fe80::2%eth0")
	v6 := netip.MustParseAddr("2001:db8::5")
	cases := []struct {
		addr string
		src  netip.Addr
		want string // "" means dropped
	}{
		{"tcp://0.0.0.0:22100", lan, "tcp://192.0.2.50:22100"},
		{"tcp://:22100", lan, "tcp://192.0.2.50:22100"},
		{"tcp://[::]:22100", lan, "tcp://192.0.2.50:22100"},
		{"tcp://0.0.0.0:22100", netip.MustParseAddr("::ffff:192.0.2.50"), "tcp://192.0.2.50:22100"},
		{"tcp://0.0.0.0:22100", loopback, "tcp://127.0.0.1:22100"},
		{"tcp://[::]:22100", ll, "tcp://[fe80::2%25eth0]:22100"},
		{"tcp://[::]:22100", v6, "tcp://[2001:db8::5]:22100"},
		{"tcp://[fe80::9]:22100", ll, "tcp://[fe80::9%25eth0]:22100"},
		{"tcp://[fe80::9%25wlan7]:22100", ll, "tcp://[fe80::9%25eth0]:22100"},
		{"tcp://[fe80::9]:22100", lan, ""},
		{"tcp://[2001:db8::9%25x]:22100", lan, "tcp://[2001:db8::9]:22100"},
		{"tcp://[::ffff:192.0.2.9]:22100", lan, "tcp://192.0.2.9:22100"},
		{"tcp://198.51.100.4:22100", lan, "tcp://198.51.100.4:22100"},
		{"tcp://NAS.Example:22100", lan, "tcp://nas.example:22100"},
		{"tcp://127.0.0.1:22100", lan, ""},
		{"tcp://[::1]:22100", lan, ""},
		{"tcp://localhost:22100", lan, ""},
		{"tcp://127.0.0.1:22100", loopback, "tcp://127.0.0.1:22100"},
		{"tcp://localhost:22100", loopback, "tcp://localhost:22100"},
		{relay, lan, relay},
		{"relay://127.0.0.1:22067/?id=" + relayID.String(), lan, ""},
		{"udp://192.0.2.1:22100", lan, ""},
	}
	for _, c := range cases {
		got, ok := resolve(c.addr, c.src)
		if c.want == "" {
			if ok {
				t.Errorf("resolve(%q, %v) = %q, want dropped", c.addr, c.src, got)
			}
			continue
		}
		if !ok || got != c.want {
			t.Errorf("resolve(%q, %v) = %q, %v; want %q", c.addr, c.src, got, ok, c.want)
			continue
		}
		if err := ValidAddress(got); err != nil {
			t.Errorf("resolved %q is invalid: %v", got, err)
		}
	}
}

// TestRelayIDCanonical checks a relay address keeps its ID through resolve.
func TestRelayIDCanonical(t *testing.T) {
	id := randomID(t)
	// A relay ID without dashes grows by 7 bytes (and a "/") when made
	// canonical: an address that would outgrow the limit is dropped.
	short := strings.ToLower(strings.ReplaceAll(id.String(), "-", ""))
	long := "relay://" + hostOfLen(MaxAddressLen-len("relay://:1?id=")-len(short)) + ":1?id=" + short
	if len(long) != MaxAddressLen || ValidAddress(long) != nil {
		t.Fatalf("bad test address of %d bytes: %v", len(long), ValidAddress(long))
	}
	if got, ok := resolve(long, loopback); ok {
		t.Fatalf("resolve kept %d-byte %q", len(got), got)
	}
	got, ok := resolve("relay://192.0.2.7:22067?id="+strings.ToLower(id.String()), loopback)
	if !ok {
		t.Fatal("dropped")
	}
	a, err := discover.ParseAddress(got)
	if err != nil || a.Relay != id {
		t.Fatalf("got %q (%v), relay %v want %v", got, err, a.Relay, id)
	}
	if a.Relay.IsZero() {
		t.Fatal("zero relay ID")
	}
}

func TestBroadcastAddr(t *testing.T) {
	cases := []struct {
		cidr string
		want string // "" means none
	}{
		{"192.0.2.2/24", "192.0.2.255"},
		{"10.1.2.3/8", "10.255.255.255"},
		{"192.0.2.5/30", "192.0.2.7"},
		{"192.0.2.5/31", ""},
		{"192.0.2.5/32", ""},
		{"2001:db8::1/64", ""},
	}
	for _, c := range cases {
		ip, n, err := net.ParseCIDR(c.cidr)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		got, ok := broadcastAddr(n)
		if c.want == "" {
			if ok {
				t.Errorf("%s: got %v, want none", c.cidr, got)
			}
			continue
		}
		if !ok || got.String() != c.want {
			t.Errorf("%s: got %v %v, want %s", c.cidr, got, ok, c.want)
		}
	}
	// An IPv4 network given with a 16-byte mask, as some systems report it.
	n := &net.IPNet{IP: net.ParseIP("192.0.2.9"), Mask: net.CIDRMask(24+96, 128)}
	if got, ok := broadcastAddr(n); !ok || got.String() != "192.0.2.255" {
		t.Errorf("16-byte mask: got %v %v", got, ok)
	}
}

func TestDefaultTargets(t *testing.T) {
	targets, err := defaultTargets(DefaultPort)
	if err != nil {
		t.Fatal(err)
	}
	for _, ap := range targets {
		a := ap.Addr()
		if ap.Port() != DefaultPort {
			t.Errorf("%v: wrong port", ap)
		}
		if a.Is6() && (a.WithZone("") != multicastGroup || a.Zone() == "") {
			t.Errorf("%v: not the multicast group on an interface", ap)
		}
		if a.Is4() && a.As4()[3]&1 == 0 {
			t.Errorf("%v: not a broadcast address", ap)
		}
	}
}

func BenchmarkParseAnnouncement(b *testing.B) {
	relay := "relay://192.0.2.7:22067/?id=" + randomID(b).String()
	a := Announcement{ID: randomID(b), Addresses: []string{"tcp://0.0.0.0:22100", "tcp://[::]:22100", relay}, InstanceID: 42}
	pkt, err := a.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		if _, err := ParseAnnouncement(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolve(b *testing.B) {
	src := netip.MustParseAddr("192.0.2.50")
	for b.Loop() {
		if _, ok := resolve("tcp://0.0.0.0:22100", src); !ok {
			b.Fatal("dropped")
		}
	}
}
