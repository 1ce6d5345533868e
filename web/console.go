package web

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/storage/db"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// contentSecurityPolicy allows only the console's own scripts and styles,
// so even a template mistake could not run an injected script.
const contentSecurityPolicy = "default-src 'self'; img-src 'self'; script-src 'self'; style-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Context keys of the console middleware.
const (
	ctxSessionID = "console.sid"
	ctxSession   = "console.session"
	// ctxAuthBy says how a /rest request was authenticated: authByKey
	// or authBySession.
	ctxAuthBy     = "console.authBy"
	authByKey     = "apikey"
	authBySession = "session"
)

// consoleRoutes adds the login pages, the console pages and the assets.
func (s *Server) consoleRoutes() error {
	pages, err := parsePages()
	if err != nil {
		return err
	}
	s.pages = pages
	e := s.echo
	e.Use(securityHeaders)
	assets, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return err
	}
	e.GET("/assets/*", echo.WrapHandler(http.StripPrefix("/assets/", http.FileServer(http.FS(assets)))))
	e.GET("/setup", s.getSetup)
	e.POST("/setup", s.postSetup)
	e.GET("/login", s.getLogin)
	e.POST("/login", s.postLogin)
	g := e.Group("", s.requireConsole)
	g.POST("/logout", s.postLogout)
	s.pageRoutes(g)
	return nil
}

func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		return next(c)
	}
}

// cookie names one of the console's cookies for this device: cookies do
// not tell ports apart, and two nodes on one host must not share them.
func (s *Server) cookie(name string) string {
	id := s.cfg.ID.String()
	if i := strings.IndexByte(id, '-'); i > 0 {
		id = id[:i]
	}
	return name + "-" + id
}

// passwordHash returns the stored admin password hash, or "" before the
// first run's setup.
func (s *Server) passwordHash(c echo.Context) (string, error) {
	h, err := s.cfg.DB.Setting(c.Request().Context(), passwordSetting)
	if errors.Is(err, db.ErrNotFound) {
		return "", nil
	}
	return h, err
}

// sessionFrom returns the request's live session and its ID.
func (s *Server) sessionFrom(c echo.Context) (string, session, bool) {
	ck, err := c.Cookie(s.cookie(sessionCookie))
	if err != nil || ck.Value == "" {
		return "", session{}, false
	}
	sess, ok := s.sessions.get(ck.Value)
	return ck.Value, sess, ok
}

// requireAuth guards /rest and /metrics: the API key, or a console session
// whose unsafe requests carry its CSRF token in X-CSRF-Token.
func (s *Server) requireAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.keyMatches(c.Request().Header.Get("X-API-Key")) {
			c.Set(ctxAuthBy, authByKey)
			return next(c)
		}
		if _, sess, ok := s.sessionFrom(c); ok {
			if !safeMethod(c.Request().Method) && !tokensEqual(c.Request().Header.Get("X-CSRF-Token"), sess.csrf) {
				return echo.NewHTTPError(http.StatusForbidden, "missing or wrong CSRF token")
			}
			c.Set(ctxAuthBy, authBySession)
			return next(c)
		}
		return echo.NewHTTPError(http.StatusUnauthorized, "authentication required")
	}
}

// requireConsole guards the console pages: before the first run's setup
// everything redirects to /setup, without a session to /login; a POST
// needs the session's CSRF token in its "csrf" form field.
func (s *Server) requireConsole(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		hash, err := s.passwordHash(c)
		if err != nil {
			return err
		}
		if hash == "" {
			return sendTo(c, "/setup")
		}
		sid, sess, ok := s.sessionFrom(c)
		if !ok {
			return sendTo(c, "/login")
		}
		if !safeMethod(c.Request().Method) && !tokensEqual(c.FormValue("csrf"), sess.csrf) {
			return echo.NewHTTPError(http.StatusForbidden, "missing or wrong CSRF token")
		}
		c.Set(ctxSessionID, sid)
		c.Set(ctxSession, sess)
		return next(c)
	}
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// preToken returns the double-submit CSRF token the login or setup form
// must echo: the browser's cookie, or a new one set now. Reusing the cookie
// keeps forms open in several tabs valid.
func (s *Server) preToken(c echo.Context) string {
	if ck, err := c.Cookie(s.cookie(preCookie)); err == nil && len(ck.Value) == len(randomToken()) {
		return ck.Value
	}
	tok := randomToken()
	c.SetCookie(&http.Cookie{Name: s.cookie(preCookie), Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: 3600, Secure: s.tls != nil})
	return tok
}

// checkPreToken verifies a login or setup form's CSRF token.
func (s *Server) checkPreToken(c echo.Context) error {
	ck, err := c.Cookie(s.cookie(preCookie))
	if err != nil || !tokensEqual(c.FormValue("csrf"), ck.Value) {
		return echo.NewHTTPError(http.StatusForbidden, "missing or wrong CSRF token; reload the page")
	}
	return nil
}

// startSession logs the browser in and sends it to the dashboard.
func (s *Server) startSession(c echo.Context) error {
	id := s.sessions.create()
	c.SetCookie(&http.Cookie{Name: s.cookie(sessionCookie), Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.tls != nil})
	c.SetCookie(&http.Cookie{Name: s.cookie(preCookie), Value: "", Path: "/", MaxAge: -1})
	return c.Redirect(http.StatusSeeOther, "/")
}

type authPage struct {
	CSRF  string
	Error string
	// Token refills the setup token field after a mistake elsewhere in
	// the form.
	Token string
}

func (s *Server) getSetup(c echo.Context) error {
	hash, err := s.passwordHash(c)
	if err != nil {
		return err
	}
	if hash != "" {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	return s.render(c, http.StatusOK, "setup.html", authPage{CSRF: s.preToken(c)})
}

// postSetup sets the admin password; it works only while none is set,
// and only with the setup token (or the API key). Wrong tokens count as
// wrong passwords for the login rate limit.
func (s *Server) postSetup(c echo.Context) error {
	if err := s.checkPreToken(c); err != nil {
		return err
	}
	s.setupMu.Lock()
	defer s.setupMu.Unlock()
	hash, err := s.passwordHash(c)
	if err != nil {
		return err
	}
	if hash != "" {
		return echo.NewHTTPError(http.StatusForbidden, ErrPasswordSet.Error())
	}
	client := clientHost(c.Request())
	if !s.sessions.allowLogin(client) {
		c.Response().Header().Set("Retry-After", fmt.Sprint(int(loginWindow/time.Second)))
		return s.render(c, http.StatusTooManyRequests, "setup.html", authPage{CSRF: s.preToken(c), Error: ErrTooManyAttempts.Error()})
	}
	if !s.setupTokenOK(c.FormValue("token")) {
		s.sessions.failLogin(client)
		s.cfg.Logger.Warn("console setup refused: wrong setup token", "client", client)
		return s.render(c, http.StatusForbidden, "setup.html", authPage{CSRF: s.preToken(c), Error: ErrSetupToken.Error()})
	}
	pw := c.FormValue("password")
	if pw != c.FormValue("confirm") {
		return s.render(c, http.StatusBadRequest, "setup.html", authPage{CSRF: s.preToken(c), Error: ErrPasswordMatch.Error(), Token: c.FormValue("token")})
	}
	err = s.setPassword(c.Request().Context(), pw)
	if errors.Is(err, ErrPasswordLength) {
		return s.render(c, http.StatusBadRequest, "setup.html", authPage{CSRF: s.preToken(c), Error: err.Error(), Token: c.FormValue("token")})
	} else if err != nil {
		return err
	}
	return s.startSession(c)
}

func (s *Server) getLogin(c echo.Context) error {
	hash, err := s.passwordHash(c)
	if err != nil {
		return err
	}
	if hash == "" {
		return c.Redirect(http.StatusSeeOther, "/setup")
	}
	if _, _, ok := s.sessionFrom(c); ok {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return s.render(c, http.StatusOK, "login.html", authPage{CSRF: s.preToken(c)})
}

// postLogin checks the password. A client with loginFailures wrong ones in
// the last loginWindow gets 429 without its password being looked at.
func (s *Server) postLogin(c echo.Context) error {
	if err := s.checkPreToken(c); err != nil {
		return err
	}
	hash, err := s.passwordHash(c)
	if err != nil {
		return err
	}
	if hash == "" {
		return c.Redirect(http.StatusSeeOther, "/setup")
	}
	client := clientHost(c.Request())
	if !s.sessions.allowLogin(client) {
		c.Response().Header().Set("Retry-After", fmt.Sprint(int(loginWindow/time.Second)))
		return s.render(c, http.StatusTooManyRequests, "login.html", authPage{CSRF: s.preToken(c), Error: ErrTooManyAttempts.Error()})
	}
	if !checkPassword(hash, c.FormValue("password")) {
		s.sessions.failLogin(client)
		s.cfg.Logger.Warn("console login failed", "client", client)
		return s.render(c, http.StatusUnauthorized, "login.html", authPage{CSRF: s.preToken(c), Error: ErrWrongPassword.Error()})
	}
	return s.startSession(c)
}

func (s *Server) postLogout(c echo.Context) error {
	s.sessions.remove(c.Get(ctxSessionID).(string))
	c.SetCookie(&http.Cookie{Name: s.cookie(sessionCookie), Value: "", Path: "/", MaxAge: -1})
	return c.Redirect(http.StatusSeeOther, "/login")
}

// parsePages parses every page with the layout and the fragments.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := n[len("templates/"):]
		if base == "layout.html" || base == "fragments.html" {
			continue
		}
		t, err := template.New(base).Funcs(templateFuncs).ParseFS(templateFS, "templates/layout.html", "templates/fragments.html", n)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", base, err)
		}
		pages[base] = t
	}
	frag, err := template.New("fragments.html").Funcs(templateFuncs).ParseFS(templateFS, "templates/fragments.html")
	if err != nil {
		return nil, fmt.Errorf("template fragments.html: %w", err)
	}
	pages["fragments.html"] = frag
	return pages, nil
}

// render executes page's "layout" into the response.
func (s *Server) render(c echo.Context, code int, page string, data any) error {
	return s.renderTemplate(c, code, page, "layout", data)
}

// renderTemplate executes the template name of page (a file in templates/)
// into the response with the status code.
func (s *Server) renderTemplate(c echo.Context, code int, page, name string, data any) error {
	t, ok := s.pages[page]
	if !ok {
		return fmt.Errorf("no template %s", page)
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().WriteHeader(code)
	return t.ExecuteTemplate(c.Response(), name, data)
}
