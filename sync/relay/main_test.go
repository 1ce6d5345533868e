package relay

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// waitTimeout bounds every wait for a state in these tests.
const waitTimeout = 10 * time.Second

// identities are made once per name and shared by the tests: generating
// one writes files, and tests only need distinct devices.
var (
	idMu       sync.Mutex
	identities = map[string]*crypt.Identity{}
	idDir      string
)

func identity(t testing.TB, name string) *crypt.Identity {
	t.Helper()
	idMu.Lock()
	defer idMu.Unlock()
	if id := identities[name]; id != nil {
		return id
	}
	id, _, err := crypt.LoadOrCreateIdentity(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	identities[name] = id
	return id
}

// testServer is a running Server.
type testServer struct {
	*Server
	hostport string
	stop     func()
}

// startServer runs a relay on addr ("127.0.0.1:0" for any port); tweak, if
// not nil, adjusts it before Serve. It stops at the end of the test.
func startServer(t testing.TB, id *crypt.Identity, addr string, max int, tweak func(*Server)) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := NewServer(ctx, ServerConfig{Identity: id, Listen: addr, MaxSessions: max})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &testServer{Server: s, hostport: s.ln.Addr().String(), stop: stop}
}

// startClient registers id with the relay at url until the end of the test
// and waits for the registration; accept handles each relayed connection.
func startClient(t testing.TB, id *crypt.Identity, url string, accept func(net.Conn, crypt.DeviceID), tweak func(*Client)) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{Identity: id, Relay: url, Accept: accept})
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Client.Serve: %v", err)
		}
	})
	testutil.Eventually(t, waitTimeout, "registered", func() bool { return c.Address() == url })
	return c
}

// registerRaw registers id over a protocol connection the test drives
// itself (it never joins sessions on its own).
func registerRaw(t testing.TB, id *crypt.Identity, s *testServer) *tls.Conn {
	t.Helper()
	tc, err := dialProtocol(context.Background(), id, s.hostport, s.id.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.NetConn().Close() })
	if err := writeMessage(tc, joinMessage()); err != nil {
		t.Fatal(err)
	}
	m, err := readMessage(tc)
	if err != nil || m.GetResponse() == nil || m.GetResponse().GetCode() != Response_OK {
		t.Fatalf("join answered %v, %v", m, err)
	}
	return tc
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}
