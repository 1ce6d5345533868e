package test

import (
	"net/url"
	"testing"
	"time"

	"lockstep/storage/home"
	"lockstep/test/testutil"
)

// TestConnectSoonAfterStartThroughRelay: a and b, in networks that only
// host r joins (r forwards nothing, so each one's SYNs to the other's
// announced address are dropped and a direct dial hangs until it times
// out), use r's discovery service and relay, and add each other as soon
// as both are registered with the relay. That is within a second of their
// start, when what the discovery service holds for each may still be its
// first announcement: its listen address, without the relay, which it
// announces a second later. They connect through the relay about when the
// direct dials' head start ends, not after the first direct dial timed out
// and the stale answer (cached for 60 s) expired: that took 84 s.
func TestConnectSoonAfterStartThroughRelay(t *testing.T) {
	l := newLab(t)
	r, ha, hb := l.host("r"), l.host("a"), l.host("b")
	l.wire(r, "ra", "10.77.4.1/24", ha, "eth0", "10.77.4.2/24")
	l.wire(r, "rb", "10.77.5.1/24", hb, "eth0", "10.77.5.2/24")
	l.ip("netns", "exec", r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=0")
	l.ip("-n", ha, "route", "add", "default", "via", "10.77.4.1")
	l.ip("-n", hb, "route", "add", "default", "via", "10.77.5.1")
	if reachable(ha, "10.77.5.2:22100") {
		t.Fatal("a reaches b's network: the test's networks are wrong")
	}

	nr := startNodeNS(t, "r", r, "--no-local-discovery", "--discovery", "--relay")
	info, err := home.ReadServeInfo(nr.home)
	if err != nil {
		t.Fatal(err)
	}
	at := func(service, ip string) string {
		u, err := url.Parse(service)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = ip + ":" + u.Port()
		return u.String()
	}
	na := startNodeNS(t, "a", ha, "--no-local-discovery",
		"--discovery-server", at(info.Discovery, "10.77.4.1"), "--relay-server", at(info.Relay, "10.77.4.1"))
	nb := startNodeNS(t, "b", hb, "--no-local-discovery",
		"--discovery-server", at(info.Discovery, "10.77.5.1"), "--relay-server", at(info.Relay, "10.77.5.1"))
	testutil.Eventually(t, 30*time.Second, "a and b to register with the relay", func() bool {
		for _, n := range []*node{na, nb} {
			st := n.findStatus()
			if len(st.Discovery.Relays) != 1 || !st.Discovery.Relays[0].Registered {
				return false
			}
		}
		return true
	})

	added := time.Now()
	na.cli("device", "add", nb.ID, "--name", "b")
	nb.cli("device", "add", na.ID, "--name", "a")
	// Far less than the 10 s a hanging direct dial takes to time out plus
	// the 60 s a found answer used to be cached; generous for a loaded
	// machine all the same.
	testutil.Eventually(t, 30*time.Second, "a and b to connect through the relay", func() bool {
		return na.connection(nb.ID) == "relay" && nb.connection(na.ID) == "relay"
	})
	t.Logf("connected %v after the devices were added", time.Since(added).Round(100*time.Millisecond))
}
