package connections

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

// waitTimeout bounds the waits for connections and pending devices.
const waitTimeout = 20 * time.Second

// memRegistry is a Registry over a fixed peer list.
type memRegistry struct {
	mu      sync.Mutex
	peers   []Peer
	pending []crypt.DeviceID
	names   []string // of pending, as their certificates give them
}

func (r *memRegistry) Peers(context.Context) ([]Peer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Peer(nil), r.peers...), nil
}

func (r *memRegistry) Pending(_ context.Context, id crypt.DeviceID, name, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, id)
	r.names = append(r.names, name)
	return nil
}

func (r *memRegistry) Seen(context.Context, crypt.DeviceID, time.Time) error { return nil }

// holdHandler keeps each connection until it ends, marking it ready.
type holdHandler struct{}

func (holdHandler) ServeConn(ctx context.Context, c *Conn) error {
	c.MarkReady()
	<-ctx.Done()
	return ctx.Err()
}

func newService(t *testing.T, id *crypt.Identity, reg Registry) *Service {
	t.Helper()
	s, err := New(context.Background(), Config{
		Identity: id, Registry: reg, Handler: holdHandler{},
		Listen: []string{"tcp://127.0.0.1:0"}, RefreshInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func identity(t *testing.T, name string) *crypt.Identity {
	t.Helper()
	id, _, err := crypt.LoadOrCreateIdentity(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestBothDialOneConnection: two services that know each other and dial at
// once end with one connection, the same one on both sides; an unknown
// device is refused and recorded as pending.
func TestBothDialOneConnection(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b, c := identity(t, "a"), identity(t, "b"), identity(t, "c")
	ra, rb, rc := &memRegistry{}, &memRegistry{}, &memRegistry{}
	sa, sb := newService(t, a, ra), newService(t, b, rb)
	ra.peers = []Peer{{ID: b.ID, Addresses: sb.Addresses()}}
	rb.peers = []Peer{{ID: a.ID, Addresses: sa.Addresses()}}
	sc := newService(t, c, rc)
	rc.peers = []Peer{{ID: a.ID, Addresses: sa.Addresses()}}

	defer serveAll(sa, sb, sc)()

	var ca, cb []Info
	agreed := false
	defer func() {
		if !agreed { // the wait failed: show what there was
			t.Logf("a's connections %+v, b's %+v", ca, cb)
		}
	}()
	testutil.Eventually(t, waitTimeout, "a single connection both sides agree on", func() bool {
		// One connection, the same on both sides. Which one depends on
		// timing: the smaller ID's dial wins only when both dials meet
		// (a loaded machine may connect one side before the other
		// dials at all); the tie rule itself is TestDuplicateResolution's.
		ca, cb = sa.Connections(), sb.Connections()
		agreed = len(ca) == 1 && len(cb) == 1 && ca[0].Dialed != cb[0].Dialed
		return agreed
	})
	testutil.Eventually(t, waitTimeout, "c to be recorded as pending", func() bool { return pendingCount(ra) > 0 })
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if len(ra.pending) == 0 || ra.pending[0] != c.ID || ra.names[0] != "c" {
		t.Fatalf("unknown device not recorded as pending with its name: %v %q", ra.pending, ra.names)
	}
	if sa.Connected(c.ID) {
		t.Fatal("an unknown device got a connection")
	}
}

func TestParseAddress(t *testing.T) {
	for in, want := range map[string]string{"tcp://127.0.0.1:22100": "127.0.0.1:22100", "tcp://[::1]:1/": "[::1]:1"} {
		if got, err := ParseAddress(in); err != nil || got != want {
			t.Errorf("ParseAddress(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "dynamic", "udp://1.2.3.4:5", "tcp://host", "tcp://h:1/path", "http://h:1"} {
		if _, err := ParseAddress(bad); err == nil {
			t.Errorf("ParseAddress(%q) accepted", bad)
		}
	}
}

// TestDuplicateResolution: of two connections between the same pair, both
// sides keep the one dialed by the smaller device ID.
func TestDuplicateResolution(t *testing.T) {
	a, b := identity(t, "a"), identity(t, "b")
	sa := &Service{cfg: Config{Identity: a}}
	sb := &Service{cfg: Config{Identity: b}}
	aSmaller := string(a.ID[:]) < string(b.ID[:])
	// The connection a dialed: a holds it with Dialed set, b without.
	aDialed := sa.preferred(&Conn{ID: b.ID, Dialed: true})
	if aDialed != sb.preferred(&Conn{ID: a.ID, Dialed: false}) {
		t.Fatal("the two sides disagree about the connection a dialed")
	}
	if aDialed != aSmaller {
		t.Fatalf("the connection dialed by a is kept = %v, want %v (a smaller: %v)", aDialed, aSmaller, aSmaller)
	}
	bDialed := sb.preferred(&Conn{ID: a.ID, Dialed: true})
	if bDialed == aDialed {
		t.Fatal("both connections are kept, or neither")
	}
}

// serveAll runs services until the returned function is called, which
// stops them and waits for them to return.
func serveAll(services ...*Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Go(func() { s.Serve(ctx) })
	}
	return func() { cancel(); wg.Wait() }
}
