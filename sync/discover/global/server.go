package global

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/crypt"
	"lockstep/sync/discover"
)

// Server defaults and HTTP limits.
const (
	DefaultTTL = 30 * time.Minute
	// DefaultMaxDevices suits the private service this is (a user's own
	// devices and their friends'): device certificates cost nothing to
	// make, so the cap is what bounds memory (at most ~40 MB here).
	DefaultMaxDevices = 10000
	// DefaultMaxPerSource: one address (a household's NAT, say) may hold
	// a hundred devices; filling the table takes a hundred addresses, and
	// then newcomers from lighter sources still take their places.
	DefaultMaxPerSource = 100

	// logEvery is the least time between two lines about refused or
	// evicted devices.
	logEvery = time.Minute

	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 8 << 10
	shutdownTimeout   = 5 * time.Second
)

// ServerConfig configures a Server. Identity and Listen are required.
type ServerConfig struct {
	Identity   *crypt.Identity
	Listen     string        // host:port; "127.0.0.1:0" in tests
	TTL        time.Duration // how long an announcement lives; default 30 min
	MaxDevices int           // default DefaultMaxDevices; see registry for what happens beyond it
	// MaxPerSource caps the live devices announced from one source (an
	// IPv4 address or an IPv6 /64); beyond it new devices get 429.
	// Default DefaultMaxPerSource.
	MaxPerSource int
	Logger       *slog.Logger     // default: discard
	Now          func() time.Time // clock of announcements and expiry; default time.Now
}

// ServerStats is a snapshot of a Server's table.
type ServerStats struct {
	Devices int // unexpired entries
}

// Server is a global discovery service bound to a TCP port. Its methods are
// safe for concurrent use; Serve runs at most once.
type Server struct {
	cfg ServerConfig
	ln  net.Listener
	reg *registry
	log *slog.Logger

	served    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	announces atomic.Int64 // accepted announcements, for tests
	fullWarn  atomic.Bool  // the "full" warning was logged since last below max

	logMu     sync.Mutex
	lastLog   time.Time // of the last line about refused or evicted devices
	refused   int       // new devices refused since that line (429 or 503)
	evictions int       // devices that made room since that line
}

// NewServer validates cfg and binds cfg.Listen. The listener is released
// when Serve returns, or by Close if Serve is never called.
func NewServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if cfg.Identity == nil {
		return nil, errors.New("discovery server: no identity")
	}
	if cfg.TTL < 0 || cfg.MaxDevices < 0 || cfg.MaxPerSource < 0 {
		return nil, errors.New("discovery server: negative TTL, MaxDevices or MaxPerSource")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MaxDevices == 0 {
		cfg.MaxDevices = DefaultMaxDevices
	}
	if cfg.MaxPerSource == 0 {
		cfg.MaxPerSource = DefaultMaxPerSource
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("discovery server: %w", err)
	}
	return &Server{
		cfg: cfg,
		ln:  ln,
		reg: newRegistry(cfg.TTL, cfg.MaxDevices, cfg.MaxPerSource),
		log: cfg.Logger.With("component", "discovery-server"),
	}, nil
}

// URL returns the service's URL as clients name it:
// "https://" + bound host:port + "/?id=" + the server's device ID.
func (s *Server) URL() string {
	return "https://" + s.ln.Addr().String() + "/?id=" + s.cfg.Identity.ID.String()
}

// Stats returns the number of unexpired entries.
func (s *Server) Stats() ServerStats {
	return ServerStats{Devices: s.reg.live(s.cfg.Now())}
}

// Close releases the listener; it is for a Server whose Serve is never
// called (Serve closes it itself). Calling it more than once is harmless.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.ln.Close() })
	return s.closeErr
}

// Serve answers requests until ctx ends, then shuts down (waiting up to a
// few seconds for requests in flight) and returns nil. It sweeps expired
// entries every TTL/2. It returns an error if the listener fails or Serve
// was called before.
func (s *Server) Serve(ctx context.Context) error {
	if !s.served.CompareAndSwap(false, true) {
		return errors.New("discovery server: Serve called twice")
	}
	defer s.Close()

	tlsCfg := crypt.ServerTLSConfig(s.cfg.Identity, func(crypt.DeviceID) bool { return true })
	tlsCfg.NextProtos = []string{"http/1.1"}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		Protocols:         &protocols,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(tls.NewListener(s.ln, tlsCfg)) }()
	s.log.Info("discovery service listening", "url", s.URL())

	sweep := time.NewTicker(max(s.cfg.TTL/2, time.Millisecond))
	defer sweep.Stop()
	for {
		select {
		case <-sweep.C:
			s.reg.sweep(s.cfg.Now())
		case err := <-done:
			srv.Close() // ends connections still open
			return fmt.Errorf("discovery server: %w", err)
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
			err := srv.Shutdown(sctx)
			cancel()
			if err != nil {
				srv.Close()
			}
			<-done
			return nil
		}
	}
}

// ServeHTTP implements the wire protocol of the package comment.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.handleAnnounce(w, r)
	case http.MethodGet, http.MethodHead:
		s.handleLookup(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

func (s *Server) handleAnnounce(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil {
		writeError(w, http.StatusForbidden, "no client certificate")
		return
	}
	id, err := crypt.PeerDeviceID(*r.TLS)
	if err != nil {
		writeError(w, http.StatusForbidden, "no client certificate")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodySize))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			err = fmt.Errorf("%w: body larger than %d bytes", ErrInvalidAnnouncement, MaxBodySize)
		}
		s.log.Debug("announcement unreadable", "device", id, "err", err)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	a, err := parseAnnouncement(body)
	if err != nil {
		s.log.Debug("announcement rejected", "device", id, "err", err)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !a.Device.IsZero() && a.Device != id {
		s.log.Debug("announcement for another device refused", "device", id, "claimed", a.Device)
		writeError(w, http.StatusForbidden, ErrForeignDevice.Error())
		return
	}
	ip := remoteIP(r.RemoteAddr)
	addrs := resolveAddresses(a.Addresses, ip)
	evicted, err := s.reg.put(id, addrs, discover.Source(ip), s.cfg.Now())
	switch {
	case errors.Is(err, errSourceFull):
		s.noteLimit(true, false, ip)
		writeError(w, http.StatusTooManyRequests, err.Error())
		return
	case err != nil:
		if s.fullWarn.CompareAndSwap(false, true) {
			s.log.Warn("discovery server full; refusing new devices", "max", s.cfg.MaxDevices)
		}
		s.noteLimit(true, false, ip)
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	case !evicted.IsZero():
		s.noteLimit(false, true, ip)
	default:
		s.fullWarn.Store(false)
	}
	s.announces.Add(1)
	s.log.Debug("announcement", "device", id, "addresses", addrs)
	w.Header().Set("Reannounce-After", strconv.FormatInt(int64(max(s.cfg.TTL/3, time.Second)/time.Second), 10))
	w.WriteHeader(http.StatusNoContent)
}

// noteLimit counts a new device refused by the limits, or one that made
// room for a newcomer, and logs at most one line per logEvery about them.
func (s *Server) noteLimit(refused, evicted bool, ip netip.Addr) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if refused {
		s.refused++
	}
	if evicted {
		s.evictions++
	}
	now := time.Now()
	if !s.lastLog.IsZero() && now.Sub(s.lastLog) < logEvery {
		return
	}
	s.log.Info("discovery server at its limits", "refused", s.refused, "evicted", s.evictions, "source", ip.String(),
		"max", s.cfg.MaxDevices, "persource", s.cfg.MaxPerSource)
	s.lastLog, s.refused, s.evictions = now, 0, 0
}

func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if len(q["device"]) != 1 {
		writeError(w, http.StatusBadRequest, "want one ?device=ID")
		return
	}
	id, err := crypt.ParseDeviceID(q.Get("device"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	addrs, seen, ok := s.reg.get(id, s.cfg.Now())
	if !ok {
		writeError(w, http.StatusNotFound, ErrNotFound.Error())
		return
	}
	writeJSON(w, http.StatusOK, lookupBody{Addresses: addrs, Seen: seen.UTC().Format(time.RFC3339)})
}

// remoteIP returns the IP of an http.Request's RemoteAddr, IPv4-mapped
// addresses unmapped; the zero Addr if it is not an IP:port.
func remoteIP(remoteAddr string) netip.Addr {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
