package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// changes records OnChange calls.
type changes struct {
	mu  sync.Mutex
	ids []crypt.DeviceID
}

func (c *changes) add(id crypt.DeviceID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
}

func (c *changes) count(id crypt.DeviceID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, x := range c.ids {
		if x == id {
			n++
		}
	}
	return n
}

func TestTwoServicesFindEachOther(t *testing.T) {
	idA, idB := identityID(t, "a"), identityID(t, "b")
	portA, portB := freePort(t), freePort(t)
	relay := "relay://192.0.2.7:22067/?id=" + randomID(t).String()
	var chA, chB changes
	a := mustNew(t, Config{
		ID: idA, Addresses: fixed("tcp://0.0.0.0:1111", relay),
		Listen: fmt.Sprintf("127.0.0.1:%d", portA), Targets: []string{fmt.Sprintf("127.0.0.1:%d", portB)},
		Interval: time.Hour, OnChange: chA.add,
	})
	b := mustNew(t, Config{
		ID: idB, Addresses: fixed("tcp://:2222", "ftp://ignored:1"),
		Listen: fmt.Sprintf("127.0.0.1:%d", portB), Targets: []string{fmt.Sprintf("127.0.0.1:%d", portA)},
		Interval: time.Hour, OnChange: chB.add,
	})
	start(t, a)
	start(t, b)
	wantA := []string{relay, "tcp://127.0.0.1:1111"}
	slices.Sort(wantA)
	testutil.Eventually(t, waitTimeout, "b to learn a", func() bool { return slices.Equal(b.Lookup(idA), wantA) })
	testutil.Eventually(t, waitTimeout, "a to learn b", func() bool { return slices.Equal(a.Lookup(idB), []string{"tcp://127.0.0.1:2222"}) })
	testutil.Eventually(t, waitTimeout, "OnChange calls", func() bool { return chA.count(idB) == 1 && chB.count(idA) == 1 })
	if got := a.Addr(); got == nil || got.(*net.UDPAddr).Port != portA {
		t.Fatalf("Addr() = %v, want port %d", got, portA)
	}
	devs := b.Devices()
	if len(devs) != 1 || devs[0].ID != idA || !slices.Equal(devs[0].Addresses, wantA) || devs[0].LastSeen.IsZero() {
		t.Fatalf("Devices() = %+v", devs)
	}
	if a.Lookup(idA) != nil || a.Lookup(randomID(t)) != nil {
		t.Fatal("Lookup of self or a stranger is not nil")
	}
	// Hearing the same addresses again is no change.
	a.Announce()
	// Announce may hold the announcement for minAnswerGap: room for b to hear it and, wrongly, call OnChange.
	time.Sleep(minAnswerGap + 200*time.Millisecond)
	if n := chB.count(idA); n != 1 {
		t.Fatalf("OnChange for an unchanged device: %d calls", n)
	}
}

func TestServeTwiceAndRestart(t *testing.T) {
	s := mustNew(t, Config{ID: randomID(t), Addresses: fixed("tcp://:1"), Listen: "127.0.0.1:0", Targets: []string{"127.0.0.1:9"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	testutil.Eventually(t, waitTimeout, "bind", func() bool { return s.Addr() != nil })
	if err := s.Serve(ctx); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Serve: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if s.Addr() != nil {
		t.Fatal("Addr() after Serve returned")
	}
	// A Service can serve again once Serve returned.
	start(t, s)
	testutil.Eventually(t, waitTimeout, "rebind", func() bool { return s.Addr() != nil })
}

func TestNewValidates(t *testing.T) {
	good := Config{ID: randomID(t), Addresses: fixed()}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*Config){
		"zero ID":          func(c *Config) { c.ID = crypt.DeviceID{} },
		"no Addresses":     func(c *Config) { c.Addresses = nil },
		"negative":         func(c *Config) { c.Interval = -time.Second },
		"bad listen":       func(c *Config) { c.Listen = "127.0.0.1" },
		"bad listen port":  func(c *Config) { c.Listen = "127.0.0.1:x" },
		"target no port":   func(c *Config) { c.Targets = []string{"127.0.0.1"} },
		"target port 0":    func(c *Config) { c.Targets = []string{"127.0.0.1:0"} },
		"target big port":  func(c *Config) { c.Targets = []string{"127.0.0.1:65536"} },
		"one target wrong": func(c *Config) { c.Targets = []string{"127.0.0.1:1", "x"} },
	}
	for name, mutate := range bad {
		cfg := good
		mutate(&cfg)
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", name, err)
		}
	}
}

func TestExpiry(t *testing.T) {
	clk := testutil.NewClock()
	var ch changes
	s := mustNew(t, Config{ID: randomID(t), Addresses: fixed("tcp://:1"), Listen: "127.0.0.1:0",
		Targets: []string{"127.0.0.1:9"}, Interval: time.Hour, Now: clk.Now, OnChange: ch.add})
	start(t, s)
	testutil.Eventually(t, waitTimeout, "bind", func() bool { return s.Addr() != nil })
	p := newPeer(t)
	other := randomID(t)
	p.send(s.Addr(), Announcement{ID: other, Addresses: []string{"tcp://0.0.0.0:5"}, InstanceID: 1})
	testutil.Eventually(t, waitTimeout, "the device", func() bool { return s.Lookup(other) != nil })
	seen := clk.Now()
	if d := s.Devices(); len(d) != 1 || !d[0].LastSeen.Equal(seen) {
		t.Fatalf("Devices() = %+v, want LastSeen %v", d, seen)
	}
	clk.Add(3*time.Hour - time.Nanosecond) // 3 × Interval minus 1 ns
	if s.Lookup(other) == nil || len(s.Devices()) != 1 {
		t.Fatal("expired before 3 × Interval")
	}
	clk.Add(time.Nanosecond) // exactly 3 × Interval
	if got := s.Lookup(other); got != nil {
		t.Fatalf("Lookup after 3 × Interval = %q", got)
	}
	if d := s.Devices(); len(d) != 0 {
		t.Fatalf("Devices() after expiry = %+v", d)
	}
	// Heard again, it appears again.
	p.send(s.Addr(), Announcement{ID: other, Addresses: []string{"tcp://0.0.0.0:5"}, InstanceID: 1})
	testutil.Eventually(t, waitTimeout, "the device again", func() bool { return s.Lookup(other) != nil })
	if n := ch.count(other); n != 2 {
		t.Fatalf("OnChange called %d times, want 2", n)
	}
}

func TestAddressSetChanges(t *testing.T) {
	clk := testutil.NewClock()
	var ch changes
	s := mustNew(t, Config{ID: randomID(t), Addresses: fixed("tcp://:1"), Listen: "127.0.0.1:0",
		Targets: []string{"127.0.0.1:9"}, Interval: time.Hour, Now: clk.Now, OnChange: ch.add})
	start(t, s)
	testutil.Eventually(t, waitTimeout, "bind", func() bool { return s.Addr() != nil })
	p := newPeer(t)
	other := randomID(t)
	send := func(inst int64, addrs ...string) {
		p.send(s.Addr(), Announcement{ID: other, Addresses: addrs, InstanceID: inst})
	}
	want := func(n int, addrs ...string) {
		t.Helper()
		testutil.Eventually(t, waitTimeout, fmt.Sprintf("%q after %d changes", addrs, n), func() bool {
			return ch.count(other) == n && slices.Equal(s.Lookup(other), addrs)
		})
	}
	send(1, "tcp://:5")
	want(1, "tcp://127.0.0.1:5")
	// Another address from the same instance adds to the set.
	clk.Add(time.Hour)
	send(1, "tcp://:6")
	want(2, "tcp://127.0.0.1:5", "tcp://127.0.0.1:6")
	// Two intervals later the first one is gone, the second still there.
	clk.Add(2 * time.Hour)
	if got := s.Lookup(other); !slices.Equal(got, []string{"tcp://127.0.0.1:6"}) {
		t.Fatalf("after the first address expired: %q", got)
	}
	// A restart replaces the set.
	send(2, "tcp://:7")
	want(3, "tcp://127.0.0.1:7")
}

func TestOwnIDIgnored(t *testing.T) {
	self := randomID(t)
	s := mustNew(t, Config{ID: self, Addresses: fixed("tcp://:1"), Listen: "127.0.0.1:0", Targets: []string{"127.0.0.1:9"}})
	start(t, s)
	testutil.Eventually(t, waitTimeout, "bind", func() bool { return s.Addr() != nil })
	p := newPeer(t)
	other := randomID(t)
	p.send(s.Addr(), Announcement{ID: self, Addresses: []string{"tcp://:5"}, InstanceID: 1})
	p.send(s.Addr(), Announcement{ID: other, Addresses: []string{"tcp://:6"}, InstanceID: 1})
	testutil.Eventually(t, waitTimeout, "the other device", func() bool { return s.Lookup(other) != nil })
	if d := s.Devices(); len(d) != 1 || d[0].ID != other || s.Lookup(self) != nil {
		t.Fatalf("Devices() = %+v", d)
	}
}

func TestRestartTriggersAnswer(t *testing.T) {
	p := newPeer(t)
	self := randomID(t)
	s := mustNew(t, Config{ID: self, Addresses: fixed("tcp://:1"), Listen: "127.0.0.1:0",
		Targets: []string{p.target()}, Interval: time.Hour})
	start(t, s)
	first, ok := p.recv(waitTimeout)
	if !ok || first.ID != self || !slices.Equal(first.Addresses, []string{"tcp://:1"}) {
		t.Fatalf("no announcement at start: %+v %v", first, ok)
	}
	testutil.Eventually(t, waitTimeout, "bind", func() bool { return s.Addr() != nil })
	other := randomID(t)
	answered := func(inst int64) bool {
		t.Helper()
		p.send(s.Addr(), Announcement{ID: other, Addresses: []string{"tcp://:5"}, InstanceID: inst})
		a, ok := p.recv(minAnswerGap + time.Second)
		if ok && (a.ID != self || a.InstanceID != first.InstanceID) {
			t.Fatalf("answer %+v, want instance %d of %v", a, first.InstanceID, self)
		}
		return ok
	}
	if !answered(1) {
		t.Fatal("a new device got no answer")
	}
	if answered(1) {
		t.Fatal("a known device, same instance, got an answer")
	}
	if !answered(2) {
		t.Fatal("a restarted device got no answer")
	}
	// Announce sends one more, as soon as the rate limit allows.
	s.Announce()
	s.Announce()
	if _, ok := p.recv(minAnswerGap + time.Second); !ok {
		t.Fatal("Announce sent nothing")
	}
	if _, ok := p.recv(minAnswerGap + 500*time.Millisecond); ok {
		t.Fatal("two Announce calls sent two announcements")
	}
}

func TestPortTakenWithoutReuse(t *testing.T) {
	taken, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) // no SO_REUSEADDR
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	p := newPeer(t)
	logs := &testutil.LogRecorder{}
	s := mustNew(t, Config{ID: randomID(t), Addresses: fixed("tcp://:1"), Listen: taken.LocalAddr().String(),
		Targets: []string{p.target()}, Interval: time.Hour, Logger: slog.New(logs)})
	start(t, s)
	if _, ok := p.recv(waitTimeout); !ok {
		t.Fatal("no announcement sent")
	}
	s.Announce()
	if _, ok := p.recv(waitTimeout); !ok {
		t.Fatal("no announcement sent on Announce")
	}
	if s.Addr() != nil {
		t.Fatalf("Addr() = %v while unbound", s.Addr())
	}
	if n := logs.CountLevel(slog.LevelWarn); n != 1 {
		t.Fatalf("%d Warn lines, want 1", n)
	}
	if n := logs.Count(slog.LevelWarn, "local discovery cannot receive announcements; still announcing"); n != 1 {
		t.Fatalf("the Warn line is not about binding")
	}
}

func TestReusePair(t *testing.T) {
	port := freePort(t)
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	logs := &testutil.LogRecorder{}
	a := mustNew(t, Config{ID: randomID(t), Addresses: fixed("tcp://:1"), Listen: listen, Targets: []string{"127.0.0.1:9"}, Logger: slog.New(logs)})
	b := mustNew(t, Config{ID: randomID(t), Addresses: fixed("tcp://:2"), Listen: listen, Targets: []string{"127.0.0.1:9"}, Logger: slog.New(logs)})
	start(t, a)
	testutil.Eventually(t, waitTimeout, "a to bind", func() bool { return a.Addr() != nil })
	start(t, b)
	testutil.Eventually(t, waitTimeout, "b to bind", func() bool { return b.Addr() != nil })
	if a.Addr().String() != listen || b.Addr().String() != listen {
		t.Fatalf("bound %v and %v, want both on %s", a.Addr(), b.Addr(), listen)
	}
	if n := logs.CountLevel(slog.LevelWarn); n != 0 {
		t.Fatalf("%d Warn lines", n)
	}
	// Linux delivers each unicast datagram to only one socket of a
	// SO_REUSEADDR pair (in practice the one bound last); only broadcast
	// and multicast datagrams reach all of them. So this only checks that
	// the datagram reached one of the two, not which.
	other := randomID(t)
	p := newPeer(t)
	p.send(a.Addr(), Announcement{ID: other, Addresses: []string{"tcp://:5"}, InstanceID: 1})
	testutil.Eventually(t, waitTimeout, "one of the pair to hear", func() bool { return a.Lookup(other) != nil || b.Lookup(other) != nil })
}

func TestMalformedDropped(t *testing.T) {
	logs := &testutil.LogRecorder{}
	s := mustNew(t, Config{ID: randomID(t), Addresses: fixed("tcp://:1"), Listen: "127.0.0.1:0",
		Targets: []string{"127.0.0.1:9"}, Interval: time.Hour, Logger: slog.New(logs)})
	start(t, s)
	testutil.Eventually(t, waitTimeout, "bind", func() bool { return s.Addr() != nil })
	p := newPeer(t)
	good := []string{"tcp://:5"}
	many := slices.Repeat(good, MaxAddresses+1)
	id := func() []byte { x := randomID(t); return x[:] }
	wrongMagic := rawPacket(t, &Announce{Id: id(), Addresses: good})
	copy(wrongMagic, "LSD0")
	oversized := packetOfLen(t, MaxPacketSize+1)
	huge := append(rawPacket(t, &Announce{Id: id(), Addresses: good}), make([]byte, 3000)...)
	bad := map[string][]byte{
		"wrong magic":  wrongMagic,
		"oversized":    oversized,
		"huge":         huge,
		"bad protobuf": append(rawPacket(t, &Announce{Id: id(), Addresses: good}), 0xff),
		"id 31":        rawPacket(t, &Announce{Id: id()[:31], Addresses: good}),
		"id 33":        rawPacket(t, &Announce{Id: append(id(), 1), Addresses: good}),
		"17 addresses": rawPacket(t, &Announce{Id: id(), Addresses: many}),
		"257 bytes":    rawPacket(t, &Announce{Id: id(), Addresses: []string{addrOfLen(257)}}),
		"bad scheme":   rawPacket(t, &Announce{Id: id(), Addresses: []string{"udp://:5", "http://192.0.2.1:80"}}),
		"bad utf-8":    badUTF8(t, randomID(t)),
	}
	for _, b := range bad {
		p.sendRaw(s.Addr(), b)
	}
	other := randomID(t)
	p.send(s.Addr(), Announcement{ID: other, Addresses: []string{"tcp://:5", "bogus"}, InstanceID: 1})
	testutil.Eventually(t, waitTimeout, "the good packet", func() bool { return s.Lookup(other) != nil })
	if d := s.Devices(); len(d) != 1 || d[0].ID != other || !slices.Equal(d[0].Addresses, []string{"tcp://127.0.0.1:5"}) {
		t.Fatalf("Devices() = %+v", d)
	}
	if n := logs.Count(slog.LevelDebug, "dropping announcement") + logs.Count(slog.LevelDebug, "dropping announcement without usable addresses"); n != len(bad) {
		t.Fatalf("%d drops logged, want %d", n, len(bad))
	}
	if n := logs.CountLevel(slog.LevelWarn); n != 0 {
		t.Fatalf("%d Warn lines for malformed packets", n)
	}
}
