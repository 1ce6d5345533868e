// Package web serves a node's REST API (JSON under /rest/), its health and
// metrics endpoints and its console pages, with Echo.
//
// Invariants: every request whose Host is not the console's address,
// localhost or a configured name is refused (421) before any route sees
// it. Every route but /healthz, /login, /setup and /assets/* needs the API
// key (X-API-Key) or a console session. Before the admin password is set
// (first run) every console page redirects to /setup, which works only
// while no password is set and only with the one-time setup token kept in
// the home (or the API key): proof of access to this machine. Every
// console POST carries a CSRF token: the session's, or for /login and
// /setup a double-submit cookie's; a session's unsafe /rest calls carry it
// in X-CSRF-Token. Names from the database or
// peers reach pages only through html/template escaping. Handlers translate
// errors into {"error": "..."} with a 4xx code for the caller's mistakes and
// 5xx for the node's own trouble. The console listens beyond loopback only
// once the admin password is set, and then only over HTTPS with the home's
// certificate; its cookies are then Secure.
package web

import (
	"context"
	"crypto/tls"
	"errors"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/crypt"
	"lockstep/storage/blob/metered"
	"lockstep/storage/db"
	"lockstep/sync/check"
	"lockstep/sync/connections"
	"lockstep/sync/engine"
	"lockstep/sync/events"
)

// Connections is what the API needs from the connection service.
type Connections interface {
	Connections() []connections.Info
	Reload()
}

// Config configures a Server.
type Config struct {
	ID     crypt.DeviceID
	DB     *db.DB
	Conns  Connections
	Engine Engine
	// Backup shares folders with receivers; nil for a node without
	// encrypted shares.
	Backup Backup
	// Receiver reports encrypted folders; nil on a node without them.
	Receiver Receiver
	// Checks runs backup checks (sync/check); nil on a node without.
	Checks *check.Service
	// Discovery reports how the node finds devices; nil when it does not.
	Discovery Discovery
	// Events is what GET /rest/events streams and the console follows; nil
	// on a node that publishes none (the stream answers 503, the console
	// polls).
	Events *events.Bus
	APIKey string
	// FolderRoot is where accepted folder offers go by default.
	FolderRoot string
	// Store describes the node's blob store, e.g. "local:/path".
	Store string
	// StoreUsage returns the blob store's requests and bytes per kind
	// since start (storage/blob/metered); nil, or ok false, when the
	// store is not metered.
	StoreUsage func() (metered.Snapshot, bool)
	// Memory returns the process's memory, nil where unknown.
	Memory func() *MemoryStatus
	// Home is the node's home directory. A console bound beyond loopback
	// keeps its HTTPS certificate there (CertFile, KeyFile); before the
	// admin password is set, the first run's setup token is there
	// (SetupTokenFile).
	Home string
	// Hosts are the names, beyond its address and localhost, that the
	// console answers to (serve --gui-host): NAME, or NAME:PORT for a
	// port other than the one it listens on. Requests for any other Host
	// are refused (DNS rebinding).
	Hosts  []string
	Logger *slog.Logger
}

// Server is the HTTP side of a node.
type Server struct {
	cfg      Config
	echo     *echo.Echo
	ln       net.Listener
	srv      *http.Server
	sessions *sessions
	// setupMu makes the first run's password setup happen once.
	setupMu sync.Mutex
	pages   map[string]*template.Template
	// tls is set when the console serves HTTPS (bound beyond loopback).
	tls *tls.Config
	// hosts decides which Host headers the console answers to.
	hosts hostPolicy
	// setupToken is the first run's one-time token, "" once the admin
	// password is set; setupMu guards it.
	setupToken string
	// grace is how long Serve lets requests finish when it stops.
	grace time.Duration
	// streamsCtx ends every event stream when the server shuts down,
	// which would otherwise wait the whole grace for them.
	streamsCtx  context.Context
	stopStreams context.CancelFunc
	// streams counts the event streams open.
	streams atomic.Int64
	// keepAlive and fallbackPoll, when set, replace the defaults of the
	// same names.
	keepAlive    time.Duration
	fallbackPoll time.Duration
	// rates measures the transfers folder statuses show.
	rates progress
}

// shutdownGrace is how long requests in progress may take to finish when
// the console stops.
const shutdownGrace = 5 * time.Second

// New binds addr and builds the routes; Serve starts answering. On
// loopback the console serves plain HTTP. Any other address needs the
// admin password set already (else ErrNeedsPassword) and cfg.Home, and is
// served over HTTPS with the home's self-signed certificate (created on
// first use), whose SHA-256 fingerprint is logged.
func New(ctx context.Context, addr string, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Backup == nil {
		cfg.Backup = noBackup{}
	}
	loopback, err := isLoopback(addr)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, echo: echo.New(), sessions: newSessions()}
	s.streamsCtx, s.stopStreams = context.WithCancel(context.Background())
	if !loopback {
		if err := s.setUpTLS(ctx, addr); err != nil {
			return nil, err
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	s.hosts = newHostPolicy(ln.Addr(), s.tls != nil, cfg.Hosts)
	if err := s.prepareSetup(ctx); err != nil {
		ln.Close()
		return nil, err
	}
	e := s.echo
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.errorHandler
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	r := e.Group("/rest", s.requireAuth)
	s.restRoutes(r)
	e.GET("/metrics", s.metricsHandler(), s.requireAuth)
	if err := s.consoleRoutes(); err != nil {
		ln.Close()
		return nil, err
	}
	s.srv = &http.Server{
		Handler:           s.checkHost(e),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		TLSConfig:         s.tls,
	}
	s.srv.RegisterOnShutdown(s.stopStreams)
	return s, nil
}

// setUpTLS prepares HTTPS for a console bound to addr beyond loopback: the
// admin password must be set, the certificate comes from the home.
func (s *Server) setUpTLS(ctx context.Context, addr string) error {
	if _, err := s.cfg.DB.Setting(ctx, passwordSetting); errors.Is(err, db.ErrNotFound) {
		return ErrNeedsPassword
	} else if err != nil {
		return err
	}
	if s.cfg.Home == "" {
		return ErrNoHome
	}
	host, _, _ := net.SplitHostPort(addr)
	cert, err := loadOrCreateCert(s.cfg.Home, net.ParseIP(host))
	if err != nil {
		return err
	}
	s.tls = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	s.cfg.Logger.Info("console serves HTTPS with a self-signed certificate", "addr", addr, "sha256", Fingerprint(cert.Certificate[0]))
	return nil
}

// URL is the base URL the server answers on: https beyond loopback, and
// a loopback address for a console bound to every address.
func (s *Server) URL() string {
	scheme := "http://"
	if s.tls != nil {
		scheme = "https://"
	}
	addr := s.ln.Addr().(*net.TCPAddr)
	ip := addr.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return scheme + net.JoinHostPort(ip.String(), strconv.Itoa(addr.Port))
}

// Serve answers requests until ctx is canceled, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		if s.tls != nil {
			errc <- s.srv.ServeTLS(s.ln, "", "")
			return
		}
		errc <- s.srv.Serve(s.ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	grace := s.grace
	if grace == 0 {
		grace = shutdownGrace
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Still open after the grace: a slow request, or a connection a
		// browser opened ahead and has sent nothing on (the server counts
		// it as new, not idle, for 5 s). The node is stopping either way;
		// that is no failure of the console.
		s.cfg.Logger.Debug("console connections still open at shutdown; closing them")
		err = s.srv.Close()
	}
	<-errc
	return err
}

// Handler is what the server answers with: the routes behind the Host
// check.
func (s *Server) Handler() http.Handler { return s.srv.Handler }

// errorHandler renders every error as {"error": "..."}. Errors that are not
// HTTP errors are the node's own trouble: 500, logged.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code := http.StatusInternalServerError
	msg := err.Error()
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		code = he.Code
		if m, ok := he.Message.(string); ok {
			msg = m
		} else {
			msg = http.StatusText(code)
		}
	case errors.Is(err, db.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, db.ErrConstraint):
		code = http.StatusBadRequest
	case errors.Is(err, engine.ErrPaused):
		code = http.StatusConflict
	}
	if code >= 500 {
		s.cfg.Logger.Error("request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
	}
	if c.Request().Method == http.MethodHead {
		c.NoContent(code)
		return
	}
	e := Error{Error: msg}
	if VerificationFailed(err) {
		e.Kind = KindVerification
	}
	c.JSON(code, e)
}

func badRequest(msg string) error {
	return echo.NewHTTPError(http.StatusBadRequest, msg)
}
