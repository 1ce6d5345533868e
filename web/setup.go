package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/labstack/echo/v4"

	"lockstep/storage/db"
)

// The first run: until the admin password is set, anyone who can reach
// the console could set it. So /setup takes the password only with proof
// of access to this machine: the one-time setup token the server writes
// to the home when it starts without a password (SetupTokenFile, mode
// 0600; the log says where, never what), or the API key. The token is
// forgotten, and its file removed, once the password is set, by /setup or
// by PUT /rest/console/password (lockstep console password).

// SetupTokenFile is the first run's setup token in the home.
const SetupTokenFile = "setup-token"

// Errors of the first run's setup.
var (
	ErrSetupToken = errors.New("wrong or missing setup token: it is in the file setup-token in this node's home (the log of 'lockstep serve' says where); or set the password with 'lockstep console password --password-file F'")
	// ErrCurrentPassword: a console session changes the password only
	// with the current one.
	ErrCurrentPassword = errors.New("the current password is wrong")
)

// prepareSetup makes the first run's setup token when no admin password
// is set, and keeps it in the home; with the password set it removes a
// token left behind.
func (s *Server) prepareSetup(ctx context.Context) error {
	_, err := s.cfg.DB.Setting(ctx, passwordSetting)
	if err == nil {
		return s.forgetSetupToken()
	}
	if !errors.Is(err, db.ErrNotFound) {
		return err
	}
	s.setupToken = randomToken()
	if s.cfg.Home == "" {
		s.cfg.Logger.Warn("console admin password not set: /setup takes the API key")
		return nil
	}
	path := filepath.Join(s.cfg.Home, SetupTokenFile)
	if err := writeFileAtomic(path, []byte(s.setupToken+"\n")); err != nil {
		return fmt.Errorf("writing the console setup token: %w", err)
	}
	s.cfg.Logger.Warn("console admin password not set: /setup asks for the one-time setup token in " + path + ", or set it with 'lockstep console password --password-file F'")
	return nil
}

// forgetSetupToken drops the setup token and its file. s.setupMu is held
// or the server is not serving yet.
func (s *Server) forgetSetupToken() error {
	s.setupToken = ""
	if s.cfg.Home == "" {
		return nil
	}
	if err := os.Remove(filepath.Join(s.cfg.Home, SetupTokenFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the console setup token: %w", err)
	}
	return nil
}

// setupTokenOK reports whether tok is the setup token or the API key.
// s.setupMu is held.
func (s *Server) setupTokenOK(tok string) bool {
	return tokensEqual(tok, s.setupToken) || tokensEqual(tok, s.cfg.APIKey)
}

// setPassword stores the admin password, ends every session and forgets
// the setup token. s.setupMu is held.
func (s *Server) setPassword(ctx context.Context, pw string) error {
	h, err := hashPassword(pw)
	if err != nil {
		return err
	}
	if err := s.cfg.DB.SetSetting(ctx, passwordSetting, h); err != nil {
		return err
	}
	s.sessions.removeAll()
	if err := s.forgetSetupToken(); err != nil {
		s.cfg.Logger.Warn("console admin password set, but the setup token stays", "err", err)
	}
	s.cfg.Logger.Info("console admin password set")
	return nil
}

// ConsolePassword is the body of PUT /rest/console/password. Current is
// needed when a console session, not the API key, changes a password
// that is set.
type ConsolePassword struct {
	Password string `json:"password"`
	Current  string `json:"current,omitempty"`
}

// putConsolePassword sets the console's admin password: with the API key
// at any time (a first run without the web page, or a forgotten
// password), from a console session only with the current password.
// Every session ends.
func (s *Server) putConsolePassword(c echo.Context) error {
	var req ConsolePassword
	if err := c.Bind(&req); err != nil {
		return badRequest("body must be {\"password\": \"...\"}")
	}
	s.setupMu.Lock()
	defer s.setupMu.Unlock()
	if by, _ := c.Get(ctxAuthBy).(string); by != authByKey {
		hash, err := s.passwordHash(c)
		if err != nil {
			return err
		}
		client := clientHost(c.Request())
		if !s.sessions.allowLogin(client) {
			return echo.NewHTTPError(http.StatusTooManyRequests, ErrTooManyAttempts.Error())
		}
		if hash != "" && !checkPassword(hash, req.Current) {
			s.sessions.failLogin(client)
			return echo.NewHTTPError(http.StatusForbidden, ErrCurrentPassword.Error())
		}
	}
	if err := s.setPassword(c.Request().Context(), req.Password); err != nil {
		if errors.Is(err, ErrPasswordLength) {
			return badRequest(err.Error())
		}
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// keyMatches reports whether key is the API key.
func (s *Server) keyMatches(key string) bool {
	return key != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}
