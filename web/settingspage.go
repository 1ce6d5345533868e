package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/storage/db"
)

// settingsPage is the data of a folder's settings page: its versioning
// policy on a trusted device, its retention on a receiver.
type settingsPage struct {
	page
	FolderID string
	// Versioned: the folder has a versioning policy (not a receiver's
	// encrypted folder).
	Versioned       bool
	Versioning      Versioning
	VersioningError string
	// Retained: the folder is an encrypted folder this receiver holds.
	Retained       bool
	Retention      Retention
	RetentionError string
}

// versioningTypes are the choices of the versioning form.
var versioningTypes = []string{"none", "trashcan", "simple", "staggered"}

func (s *Server) settingsPageRoutes(g *echo.Group) {
	g.GET("/folders/:id/settings", s.getSettingsPage)
	g.POST("/folders/:id/settings/versioning", s.postVersioningForm)
	g.POST("/folders/:id/settings/retention", s.postRetentionForm)
	g.POST("/folders/:id/settings/prune", s.postPruneForm)
}

// getSettingsPage shows the folder's current policies as forms; a policy
// that cannot be read is shown as an error instead of its form.
func (s *Server) getSettingsPage(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	p := settingsPage{page: s.newPage(c, "Settings of "+f.ID), FolderID: f.ID}
	if f.Type != db.Encrypted {
		p.Versioned = true
		if err := s.callRESTInto(c, s.getVersioning, nil, &p.Versioning, "id", f.ID); err != nil {
			p.VersioningError = s.errorMessage(err)
		}
	} else if s.cfg.Receiver != nil {
		p.Retained = true
		if err := s.callRESTInto(c, s.getRetention, nil, &p.Retention, "id", f.ID); err != nil {
			p.RetentionError = s.errorMessage(err)
		}
	}
	return s.render(c, http.StatusOK, "settings.html", p)
}

func (s *Server) postVersioningForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	req := Versioning{Type: c.FormValue("type")}
	nums, err := formInts(c, "keep", "days")
	if err == nil {
		req.Keep, req.Days = nums[0], nums[1]
		err = s.callREST(c, s.putVersioning, req, "id", f.ID)
	}
	return s.settingsResult(c, f.ID, "Versioning saved.", err)
}

func (s *Server) postRetentionForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	nums, err := formInts(c, "keepLast", "keepHourly", "keepDaily", "keepWeekly", "keepMonthly", "keepYearly", "keepDeletedDays")
	if err == nil {
		req := Retention{KeepLast: nums[0], KeepHourly: nums[1], KeepDaily: nums[2], KeepWeekly: nums[3], KeepMonthly: nums[4], KeepYearly: nums[5], KeepDeletedDays: nums[6]}
		err = s.callREST(c, s.putRetention, req, "id", f.ID)
	}
	return s.settingsResult(c, f.ID, "Retention saved.", err)
}

// postPruneForm prunes the receiver's folder, or with the "dryRun" field
// set only reports what a prune would drop.
func (s *Server) postPruneForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	var out Pruned
	req := Prune{DryRun: c.FormValue("dryRun") != ""}
	if f.Type != db.Encrypted {
		err = badRequest("pruning from the console applies to a receiver's encrypted folder")
	} else {
		err = s.callRESTInto(c, s.postPrune, req, &out, "id", f.ID)
	}
	verb := "Pruned"
	if req.DryRun {
		verb = "Preview: a prune would drop"
	}
	msg := fmt.Sprintf("%s %d versions (%d files entirely), %d chunks, %s; %d versions kept.",
		verb, out.Records, out.Files, out.Chunks, formatBytes(out.Bytes), out.Kept)
	return s.settingsResult(c, f.ID, msg, err)
}

// settingsResult flashes ok or err's message and shows the settings page.
func (s *Server) settingsResult(c echo.Context, id, ok string, err error) error {
	msg := ok
	if err != nil {
		msg = s.errorMessage(err)
	}
	s.sessions.setFlash(c.Get(ctxSessionID).(string), msg)
	return c.Redirect(http.StatusSeeOther, "/folders/"+url.PathEscape(id)+"/settings")
}

// errorMessage is how a form shows err: an HTTP error's message, any
// other error's text (logged too).
func (s *Server) errorMessage(err error) string {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return errorPrefix + pageWords(fmt.Sprint(he.Message))
	}
	s.cfg.Logger.Warn("console form failed", "err", err)
	return errorPrefix + pageWords(err.Error())
}

// fieldLabels are the labels of the settings forms' number fields, for
// their errors.
var fieldLabels = map[string]string{
	"keep": "Keep", "days": "Days",
	"keepLast": "Keep last", "keepHourly": "Keep hourly", "keepDaily": "Keep daily", "keepWeekly": "Keep weekly",
	"keepMonthly": "Keep monthly", "keepYearly": "Keep yearly", "keepDeletedDays": "Keep deleted files for days",
}

// formInts reads the named form fields as non-negative whole numbers; an
// empty field is 0.
func formInts(c echo.Context, names ...string) ([]int, error) {
	out := make([]int, len(names))
	for i, n := range names {
		v := strings.TrimSpace(c.FormValue(n))
		if v == "" {
			continue
		}
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 {
			label := fieldLabels[n]
			if label == "" {
				label = n
			}
			return nil, badRequest(fmt.Sprintf("%s: enter a whole number, 0 or more", label))
		}
		out[i] = k
	}
	return out, nil
}

// parseFormTime reads a datetime-local value (no zone, taken as UTC) or
// an RFC 3339 time, and returns it as RFC 3339 in UTC.
func parseFormTime(v string) (string, error) {
	v = strings.TrimSpace(v)
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC().Format(time.RFC3339), nil
		}
	}
	return "", badRequest(fmt.Sprintf("time %q: want a date and time such as 2026-01-02T15:04", v))
}
