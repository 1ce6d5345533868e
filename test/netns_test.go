package test

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lockstep/storage/home"
	"lockstep/test/testutil"
)

// lab builds hosts as network namespaces joined by veth pairs, so tests can
// see what crosses a network: broadcasts on a LAN, hosts that can't reach
// each other. It needs root and iproute2; CI runs as root and must run
// these tests.
type lab struct {
	t      testing.TB
	prefix string
}

func newLab(t testing.TB) *lab {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	name := strings.TrimPrefix(strings.TrimPrefix(t.Name(), "Test"), "Benchmark")
	l := &lab{t: t, prefix: fmt.Sprintf("ls%d%s", os.Getpid()%100000, strings.ToLower(name[:3]))}
	probe := l.prefix + "probe"
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("network namespaces can't be made here (root and iproute2 needed): %v: %s", err, out)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	exec.Command("ip", "netns", "del", probe).Run()
	return l
}

// ip runs `ip args...`, failing the test on error.
func (l *lab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// host makes a namespace with its loopback up and returns its name.
func (l *lab) host(name string) string {
	l.t.Helper()
	ns := l.prefix + name
	l.ip("netns", "add", ns)
	l.t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	l.ip("-n", ns, "link", "set", "lo", "up")
	// Interfaces made later get their IPv6 link-local address at once
	// instead of after duplicate address detection.
	l.ip("netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0")
	return ns
}

// wire joins namespaces a and b with a veth pair named ifA/ifB, addresses
// addrA/addrB in CIDR form ("" for none, e.g. a bridge port).
func (l *lab) wire(a, ifA, addrA, b, ifB, addrB string) {
	l.t.Helper()
	l.ip("-n", a, "link", "add", ifA, "type", "veth", "peer", "name", ifB, "netns", b)
	for _, end := range [][3]string{{a, ifA, addrA}, {b, ifB, addrB}} {
		if end[2] != "" {
			l.ip("-n", end[0], "addr", "add", end[2], "brd", "+", "dev", end[1])
		}
		l.ip("-n", end[0], "link", "set", end[1], "up")
	}
}

// reachable reports whether a TCP connection from namespace ns to
// host:port succeeds within two seconds.
func reachable(ns, hostport string) bool {
	host, port, _ := strings.Cut(hostport, ":")
	err := exec.Command("ip", "netns", "exec", ns, "timeout", "2", "bash", "-c",
		fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port)).Run()
	return err == nil
}

// startNodeNS starts a node in namespace ns, listening for sync on every
// address there on the default port.
func startNodeNS(t testing.TB, name, ns string, extra ...string) *node {
	t.Helper()
	return launch(t, name, filepath.Join(t.TempDir(), name), ns, append([]string{"--listen", "tcp://0.0.0.0:22100"}, extra...))
}

// findStatus is the part of the status the discovery tests read.
type findStatus struct {
	Devices []struct {
		ID         string `json:"id"`
		Connected  bool   `json:"connected"`
		Address    string `json:"address"`
		Connection string `json:"connection"`
	} `json:"devices"`
	Discovery struct {
		LocalDiscovery bool           `json:"localDiscovery"`
		Nearby         []nearbyDevice `json:"nearby"`
		Servers        []struct {
			URL   string `json:"url"`
			Error string `json:"error"`
		} `json:"servers"`
		Relays []struct {
			URL        string `json:"url"`
			Registered bool   `json:"registered"`
		} `json:"relays"`
		DiscoveryService *struct {
			Devices int `json:"devices"`
		} `json:"discoveryService"`
		RelayService *struct {
			Registered int   `json:"registered"`
			Sessions   int   `json:"sessions"`
			Bytes      int64 `json:"bytes"`
		} `json:"relayService"`
	} `json:"discovery"`
}

type nearbyDevice struct {
	ID        string   `json:"id"`
	Addresses []string `json:"addresses"`
}

func (n *node) findStatus() findStatus {
	var st findStatus
	n.get("/rest/status", &st)
	return st
}

// connection returns how n is connected to id ("" when it is not).
func (n *node) connection(id string) string {
	for _, d := range n.findStatus().Devices {
		if d.ID == id && d.Connected {
			return d.Connection
		}
	}
	return ""
}

// lan makes hosts joined by a bridge, with the given IPv4 addresses ("" for
// IPv6 link-local only).
func (l *lab) lan(addrs ...string) []string {
	l.t.Helper()
	sw := l.host("sw")
	// Without snooping the bridge floods multicast like a plain switch,
	// whatever MLD reports it has or hasn't seen.
	l.ip("-n", sw, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	l.ip("-n", sw, "link", "set", "br0", "up")
	var hosts []string
	for i, addr := range addrs {
		name := string(rune('a' + i))
		ns := l.host(name)
		port := "p" + name
		l.wire(ns, "eth0", addr, sw, port, "")
		l.ip("-n", sw, "link", "set", port, "master", "br0")
		hosts = append(hosts, ns)
	}
	return hosts
}

// TestLocalDiscovery: two nodes on one LAN, neither given an address for
// the other, find each other by broadcast and sync; a third node that
// nobody added shows as nearby.
func TestLocalDiscovery(t *testing.T) {
	l := newLab(t)
	hosts := l.lan("10.77.1.1/24", "10.77.1.2/24", "10.77.1.3/24")
	a := startNodeNS(t, "a", hosts[0])
	b := startNodeNS(t, "b", hosts[1])
	c := startNodeNS(t, "c", hosts[2])
	// A second node on a's host shares the discovery port and is heard too.
	a2 := launch(t, "a2", filepath.Join(t.TempDir(), "a2"), hosts[0], []string{"--listen", "tcp://0.0.0.0:22101"})
	testutil.Eventually(t, 30*time.Second, "b to hear a and a2", func() bool {
		heard := map[string]bool{}
		for _, d := range b.findStatus().Discovery.Nearby {
			heard[d.ID] = slices.ContainsFunc(d.Addresses, func(s string) bool { return strings.HasPrefix(s, "tcp://10.77.1.1:") })
		}
		return heard[a.ID] && heard[a2.ID]
	})

	// Each is heard by IPv4 broadcast (and by IPv6 multicast on its
	// link-local address, which the IPv6 test covers).
	nearby := map[string][]string{}
	testutil.Eventually(t, 30*time.Second, "a to hear b and c on the LAN", func() bool {
		clear(nearby)
		for _, d := range a.findStatus().Discovery.Nearby {
			nearby[d.ID] = d.Addresses
		}
		return nearby[b.ID] != nil && nearby[c.ID] != nil
	})
	if !slices.Contains(nearby[b.ID], "tcp://10.77.1.2:22100") || !slices.Contains(nearby[c.ID], "tcp://10.77.1.3:22100") {
		t.Fatalf("nearby on a: %q", nearby)
	}

	a.cli("device", "add", b.ID, "--name", "b")
	b.cli("device", "add", a.ID, "--name", "a")
	dirA, dirB := filepath.Join(t.TempDir(), "fa"), filepath.Join(t.TempDir(), "fb")
	writeFile(t, filepath.Join(dirA, "hello.txt"), []byte("found on the LAN\n"), 0o644)
	writeFile(t, filepath.Join(dirA, "sub/data.bin"), randomBytes(7, 1<<20), 0o644)
	a.cli("folder", "add", "f", dirA)
	b.cli("folder", "add", "f", dirB)
	a.cli("folder", "share", "f", b.ID)
	b.cli("folder", "share", "f", a.ID)
	waitSame(t, converge, dirA, dirB)
	if got := a.connection(b.ID); got != "lan" {
		t.Errorf("a is connected to b via %q, want lan", got)
	}
	st := a.findStatus()
	isB := func(d nearbyDevice) bool { return d.ID == b.ID }
	isC := func(d nearbyDevice) bool { return d.ID == c.ID }
	if slices.ContainsFunc(st.Discovery.Nearby, isB) || !slices.ContainsFunc(st.Discovery.Nearby, isC) {
		t.Errorf("after adding b, nearby on a = %+v, want c and not b", st.Discovery.Nearby)
	}
	if out := a.cli("device", "nearby"); !strings.Contains(out, c.ID) || strings.Contains(out, b.ID) {
		t.Errorf("device nearby on a:\n%s", out)
	}
}

// TestLocalDiscoveryIPv6: on a LAN with nothing but IPv6 link-local
// addresses, nodes find each other by multicast and connect to the
// link-local address they heard, zone included.
func TestLocalDiscoveryIPv6(t *testing.T) {
	l := newLab(t)
	hosts := l.lan("", "")
	a := launch(t, "a", filepath.Join(t.TempDir(), "a"), hosts[0], []string{"--listen", "tcp://[::]:22100"})
	b := launch(t, "b", filepath.Join(t.TempDir(), "b"), hosts[1], []string{"--listen", "tcp://[::]:22100"})
	a.cli("device", "add", b.ID)
	b.cli("device", "add", a.ID)
	dirA, dirB := filepath.Join(t.TempDir(), "fa"), filepath.Join(t.TempDir(), "fb")
	writeFile(t, filepath.Join(dirA, "v6.txt"), []byte("over link-local IPv6\n"), 0o644)
	a.cli("folder", "add", "f", dirA)
	b.cli("folder", "add", "f", dirB)
	a.cli("folder", "share", "f", b.ID)
	b.cli("folder", "share", "f", a.ID)
	waitSame(t, converge, dirA, dirB)
	for _, d := range a.findStatus().Devices {
		if d.ID == b.ID && (d.Connection != "lan" || !strings.HasPrefix(d.Address, "[fe80::")) {
			t.Errorf("a's connection to b: %s via %s, want a link-local lan address", d.Address, d.Connection)
		}
	}
}

// relayLab builds the relay test's networks: hosts a and b, each joined
// only to host r (which forwards nothing) and routing through it; r runs
// the discovery service and a relay, and a and b use them. It returns the
// three nodes once a and b are registered with the relay.
func relayLab(t testing.TB) (nr, na, nb *node) {
	t.Helper()
	l := newLab(t)
	r, ha, hb := l.host("r"), l.host("a"), l.host("b")
	l.wire(r, "ra", "10.77.2.1/24", ha, "eth0", "10.77.2.2/24")
	l.wire(r, "rb", "10.77.3.1/24", hb, "eth0", "10.77.3.2/24")
	l.ip("netns", "exec", r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=0")
	l.ip("-n", ha, "route", "add", "default", "via", "10.77.2.1")
	l.ip("-n", hb, "route", "add", "default", "via", "10.77.3.1")

	nr = startNodeNS(t, "r", r, "--no-local-discovery", "--discovery", "--relay")
	info, err := home.ReadServeInfo(nr.home)
	if err != nil {
		t.Fatal(err)
	}
	if info.Discovery == "" || info.Relay == "" {
		t.Fatalf("serve.json of r lacks the services: %+v", info)
	}
	// r's services listen on every address; each side uses the one on
	// its own network.
	at := func(service, ip string) string {
		u, err := url.Parse(service)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = ip + ":" + u.Port()
		return u.String()
	}
	na = startNodeNS(t, "a", ha, "--no-local-discovery",
		"--discovery-server", at(info.Discovery, "10.77.2.1"), "--relay-server", at(info.Relay, "10.77.2.1"))
	nb = startNodeNS(t, "b", hb, "--no-local-discovery",
		"--discovery-server", at(info.Discovery, "10.77.3.1"), "--relay-server", at(info.Relay, "10.77.3.1"))
	if reachable(ha, "10.77.3.2:22100") || reachable(hb, "10.77.2.2:22100") {
		t.Fatal("a and b reach each other directly: the test's networks are wrong")
	}
	if !reachable(ha, "10.77.2.1:22067") || !reachable(hb, "10.77.3.1:22067") {
		t.Fatal("a or b can't reach the relay")
	}
	testutil.Eventually(t, 30*time.Second, "a and b to register with the relay", func() bool {
		for _, n := range []*node{na, nb} {
			st := n.findStatus()
			if len(st.Discovery.Relays) != 1 || !st.Discovery.Relays[0].Registered {
				return false
			}
		}
		return true
	})
	return nr, na, nb
}

// TestRelayThroughDiscovery: a and b sit in separate networks that only
// the host r joins (r forwards nothing). r runs the discovery service and
// a relay; a and b, with no address for each other, find each other there
// and sync through the relay, with TLS end to end.
func TestRelayThroughDiscovery(t *testing.T) {
	nr, na, nb := relayLab(t)
	na.cli("device", "add", nb.ID, "--name", "b")
	nb.cli("device", "add", na.ID, "--name", "a")
	dirA, dirB := filepath.Join(t.TempDir(), "fa"), filepath.Join(t.TempDir(), "fb")
	writeFile(t, filepath.Join(dirA, "hello.txt"), []byte("through the relay\n"), 0o644)
	writeFile(t, filepath.Join(dirA, "sub/data.bin"), randomBytes(8, 4<<20+17), 0o644)
	na.cli("folder", "add", "f", dirA)
	nb.cli("folder", "add", "f", dirB)
	na.cli("folder", "share", "f", nb.ID)
	nb.cli("folder", "share", "f", na.ID)
	waitSame(t, converge, dirA, dirB)
	// And back the other way.
	writeFile(t, filepath.Join(dirB, "reply.txt"), []byte("from b"), 0o644)
	waitSame(t, converge, dirA, dirB)

	if got := na.connection(nb.ID); got != "relay" {
		t.Errorf("a is connected to b via %q, want relay", got)
	}
	if got := nb.connection(na.ID); got != "relay" {
		t.Errorf("b is connected to a via %q, want relay", got)
	}
	// The CLI's plain output says so too.
	if out := na.cli("device", "list"); !strings.Contains(out, "relay") {
		t.Errorf("device list on a does not say relay:\n%s", out)
	}
	if out := na.cli("status"); !strings.Contains(out, "(relay)") {
		t.Errorf("status on a does not say relay:\n%s", out)
	}
	rs := nr.findStatus().Discovery
	if rs.DiscoveryService == nil || rs.DiscoveryService.Devices < 2 {
		t.Errorf("discovery service on r: %+v", rs.DiscoveryService)
	}
	// The relay counts bytes a MiB at a time per direction: the 4 MiB file
	// shows as at least 2.
	if rs.RelayService == nil || rs.RelayService.Sessions < 1 || rs.RelayService.Bytes < 2<<20 {
		t.Errorf("relay on r: %+v (want a live session that carried the 4 MiB file)", rs.RelayService)
	}
	for _, n := range []*node{na, nb} {
		for _, s := range n.findStatus().Discovery.Servers {
			if s.Error != "" {
				t.Errorf("%s: discovery server %s: %s", n.name, s.URL, s.Error)
			}
		}
	}
}

// BenchmarkRelay measures, through a relay on the namespaces of
// relayLab, the time from adding the devices to their first connection
// (lookup, direct dials given up after their head start, relay session)
// and the sync of a 256 MiB file through the relay.
func BenchmarkRelay(b *testing.B) {
	for range b.N {
		b.StopTimer()
		_, na, nb := relayLab(b)
		dirA, dirB := filepath.Join(b.TempDir(), "fa"), filepath.Join(b.TempDir(), "fb")
		writeFile(b, filepath.Join(dirA, "big.bin"), randomBytes(9, 256<<20), 0o644)
		na.cli("folder", "add", "f", dirA)
		nb.cli("folder", "add", "f", dirB)
		testutil.Eventually(b, 5*time.Minute, "a to scan", func() bool { return na.folder(b).LocalFiles == 1 })
		b.StartTimer()
		start := time.Now()
		na.cli("device", "add", nb.ID)
		nb.cli("device", "add", na.ID)
		testutil.Eventually(b, time.Minute, "a relayed connection", func() bool { return na.connection(nb.ID) == "relay" })
		connected := time.Since(start)
		na.cli("folder", "share", "f", nb.ID)
		nb.cli("folder", "share", "f", na.ID)
		syncStart := time.Now()
		waitSame(b, 5*time.Minute, dirA, dirB)
		secs := time.Since(syncStart).Seconds()
		b.StopTimer()
		b.ReportMetric(connected.Seconds(), "s-connect")
		b.ReportMetric(secs, "s-256MiB")
		b.ReportMetric(256*(1<<20)/secs/1e6, "MB/s")
		na.stop()
		nb.stop()
	}
}
