package test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// newDeviceID makes an identity in a home of its own and returns its
// device ID; no node runs for it.
func newDeviceID(t *testing.T, name string) string {
	t.Helper()
	out := strings.TrimSpace(mustRun(t, filepath.Join(t.TempDir(), name), "init", "--name", name))
	return out[strings.LastIndex(out, "\n")+1:]
}

// listedDevice is a device as `device list --json` prints it.
type listedDevice struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Addresses    []string `json:"addresses"`
	Untrusted    bool     `json:"untrusted"`
	WasUntrusted bool     `json:"wasUntrusted"`
}

// device returns id as n's `device list --json` lists it.
func (n *node) device(id string) listedDevice {
	n.t.Helper()
	var devs []listedDevice
	if err := json.Unmarshal([]byte(n.cli("device", "list", "--json")), &devs); err != nil {
		n.t.Fatal(err)
	}
	for _, d := range devs {
		if d.ID == id {
			return d
		}
	}
	n.t.Fatalf("%s does not list device %s", n.name, id)
	return listedDevice{}
}

// statusUntrusted reports whether n's status --json shows id untrusted.
func (n *node) statusUntrusted(id string) bool {
	n.t.Helper()
	var st status
	if err := json.Unmarshal([]byte(n.cli("status", "--json")), &st); err != nil {
		n.t.Fatal(err)
	}
	for _, d := range st.Devices {
		if d.ID == id {
			return d.Untrusted
		}
	}
	n.t.Fatalf("%s's status does not show device %s", n.name, id)
	return false
}

// failsWith runs a command that must fail with one line on stderr that
// holds every one of want.
func failsWith(t *testing.T, n *node, args []string, want ...string) {
	t.Helper()
	r := run(t, n.home, args...)
	msg := strings.TrimSpace(r.stderr)
	if r.code == 0 || strings.Contains(msg, "\n") {
		t.Errorf("lockstep %s: exit %d, stderr %q: want one line and a failure", strings.Join(args, " "), r.code, r.stderr)
		return
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("lockstep %s: %q does not say %q", strings.Join(args, " "), msg, w)
		}
	}
}

// TestDeviceAddKeepsTrust: adding a known device again keeps its trust
// (a receiver re-added without --untrusted stays a receiver, and a folder
// still cannot be shared with it in plaintext); a conflicting flag is
// refused and points at `device set`, which changes trust only when told
// to, and makes a device that was ever untrusted trusted only with --yes.
func TestDeviceAddKeepsTrust(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	a := startNode(t, "a")
	recv, peer := newDeviceID(t, "receiver"), newDeviceID(t, "peer")

	a.cli("device", "add", recv, "--name", "vps", "--address", "tcp://127.0.0.1:1", "--untrusted")
	a.cli("device", "add", recv, "--address", "tcp://127.0.0.1:2")
	d := a.device(recv)
	if !d.Untrusted || !a.statusUntrusted(recv) {
		t.Fatalf("re-adding the receiver without --untrusted made it trusted: %+v", d)
	}
	if len(d.Addresses) != 1 || d.Addresses[0] != "tcp://127.0.0.1:2" || d.Name != "vps" {
		t.Errorf("re-adding did not update the address and keep the name: %+v", d)
	}
	// The folder still goes to it only encrypted.
	a.cli("folder", "add", "docs", filepath.Join(t.TempDir(), "docs"))
	failsWith(t, a, []string{"folder", "share", "docs", recv}, "password")
	failsWith(t, a, []string{"device", "add", recv, "--trusted"}, "untrusted", "device set")
	if !a.device(recv).Untrusted {
		t.Fatal("a refused device add changed trust")
	}

	// Making it trusted takes device set, and --yes since it was untrusted.
	failsWith(t, a, []string{"device", "set", recv, "--trusted"}, "--yes", "plaintext")
	if !a.device(recv).Untrusted {
		t.Fatal("device set --trusted without --yes made it trusted")
	}
	failsWith(t, a, []string{"device", "set", recv}, "--trusted", "--untrusted")
	failsWith(t, a, []string{"device", "set", recv, "--trusted", "--untrusted"}, "--trusted", "--untrusted")
	r := run(t, a.home, "device", "set", recv, "--trusted", "--yes")
	if r.code != 0 {
		t.Fatalf("device set --trusted --yes: exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "plaintext") {
		t.Errorf("making a receiver trusted warns of nothing: stderr %q", r.stderr)
	}
	if d := a.device(recv); d.Untrusted || !d.WasUntrusted || a.statusUntrusted(recv) {
		t.Fatalf("after device set --trusted --yes: %+v", d)
	}
	// Once untrusted, always asked.
	a.cli("device", "set", recv, "--untrusted")
	failsWith(t, a, []string{"device", "set", recv, "--trusted"}, "--yes")

	// A trusted peer re-added stays trusted; --untrusted on it is refused.
	a.cli("device", "add", peer, "--name", "laptop")
	a.cli("device", "add", peer, "--address", "tcp://127.0.0.1:3")
	if d := a.device(peer); d.Untrusted || d.WasUntrusted {
		t.Fatalf("the peer after re-adding: %+v", d)
	}
	failsWith(t, a, []string{"device", "add", peer, "--untrusted"}, "trusted", "device set")
	if a.device(peer).Untrusted {
		t.Fatal("a refused device add changed trust")
	}
	a.cli("device", "set", peer, "--untrusted")
	if d := a.device(peer); !d.Untrusted {
		t.Fatalf("device set --untrusted: %+v", d)
	}
	failsWith(t, a, []string{"device", "set", peer, "--trusted"}, "--yes")

	// Removing a receiver does not forget that it was one: added again,
	// it is not trusted without the explicit step.
	a.cli("device", "remove", recv)
	failsWith(t, a, []string{"device", "add", recv}, "untrusted", "device set")
	a.cli("device", "add", recv, "--untrusted")
	if d := a.device(recv); !d.Untrusted || !d.WasUntrusted {
		t.Fatalf("the receiver added again: %+v", d)
	}
}

// TestConsoleTrustChange: the console changes a device's trust only after
// a confirm step, which for a device that was untrusted says it will get
// the plaintext of the folders shared with it.
func TestConsoleTrustChange(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	browser := newBrowser(t)
	a := startNode(t, "a")
	recv := newDeviceID(t, "receiver")
	a.cli("device", "add", recv, "--name", "vps", "--untrusted")
	a.cli("folder", "add", "docs", filepath.Join(t.TempDir(), "docs"))
	ca := openConsole(t, browser, a)
	ca.setUp()

	row := `tr[data-device="` + recv + `"]`
	ca.visit("/devices", row)
	ca.submit("asking to trust the receiver", nil, row+" a.trust-device", "#confirm")
	if got := ca.text("#confirm-question"); !strings.Contains(got, "vps") || !strings.Contains(got, "trusted") {
		t.Errorf("confirm question %q", got)
	}
	if got := ca.text("#confirm-note"); !strings.Contains(got, "plaintext") {
		t.Errorf("confirm note %q does not warn of plaintext", got)
	}
	if !a.device(recv).Untrusted {
		t.Fatal("the confirm page alone made the device trusted")
	}
	ca.submit("cancelling", nil, "#cancel", row)
	if !a.device(recv).Untrusted {
		t.Fatal("cancelling made the device trusted")
	}
	ca.submit("asking again", nil, row+" a.trust-device", "#confirm")
	ca.submit("trusting the receiver", nil, "#confirm", "#flash")
	if got := ca.text("#flash"); !strings.Contains(got, "trusted") {
		t.Fatalf("trusting: %q", got)
	}
	if d := a.device(recv); d.Untrusted || !d.WasUntrusted {
		t.Fatalf("after the console's confirm: %+v", d)
	}
	if got := ca.text(row + " .trust"); !strings.Contains(got, "trusted") || strings.Contains(got, "untrusted") {
		t.Errorf("the devices page shows trust %q", got)
	}

	// And back, also after a confirm step.
	ca.submit("asking to untrust", nil, row+" a.trust-device", "#confirm")
	ca.submit("untrusting", nil, "#confirm", "#flash")
	if !a.device(recv).Untrusted {
		t.Fatal("the device is still trusted")
	}
	if n := ca.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}
