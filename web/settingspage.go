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
	// Preview says what a prune with the form's retention would drop;
	// Unsaved: the form's retention is not the saved one.
	Preview string
	Unsaved bool
}

// KeepsAll reports whether the form's retention keeps every version:
// every Keep count 0.
func (p settingsPage) KeepsAll() bool {
	r := p.Retention
	return r.KeepLast == 0 && r.KeepHourly == 0 && r.KeepDaily == 0 && r.KeepWeekly == 0 && r.KeepMonthly == 0 && r.KeepYearly == 0
}

// versioningTypes are the choices of the versioning form.
var versioningTypes = []string{"none", "trashcan", "simple", "staggered"}

func (s *Server) settingsPageRoutes(g *echo.Group) {
	g.GET("/folders/:id/settings", s.getSettingsPage)
	g.POST("/folders/:id/settings/versioning", s.postVersioningForm)
	g.POST("/folders/:id/settings/retention", s.postRetentionForm)
	g.GET("/folders/:id/settings/prune", s.getPruneConfirm)
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
	req, err := formRetention(c)
	if err == nil {
		err = s.callREST(c, s.putRetention, req, "id", f.ID)
	}
	return s.settingsResult(c, f.ID, "Retention saved.", err)
}

// retentionFields are the retention form's fields, in Retention's order.
var retentionFields = []string{"keepLast", "keepHourly", "keepDaily", "keepWeekly", "keepMonthly", "keepYearly", "keepDeletedDays"}

// formRetention reads the retention form.
func formRetention(c echo.Context) (Retention, error) {
	nums, err := formInts(c, retentionFields...)
	if err != nil {
		return Retention{}, err
	}
	return Retention{KeepLast: nums[0], KeepHourly: nums[1], KeepDaily: nums[2], KeepWeekly: nums[3], KeepMonthly: nums[4], KeepYearly: nums[5], KeepDeletedDays: nums[6]}, nil
}

// prunedWords says what a prune dropped, or would.
func prunedWords(out Pruned) string {
	return fmt.Sprintf("%d versions (%d files entirely), %d chunks, %s; %d versions kept",
		out.Records, out.Files, out.Chunks, formatBytes(out.Bytes), out.Kept)
}

// postPruneForm prunes the receiver's folder (the confirm page's
// button), or with the "dryRun" field set shows what a prune would drop:
// with the retention typed in the form when it has one (kept in the form,
// not saved), else with the saved one.
func (s *Server) postPruneForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	if f.Type != db.Encrypted {
		return s.settingsResult(c, f.ID, "", badRequest("pruning from the console applies to a receiver's encrypted folder"))
	}
	if c.FormValue("dryRun") == "" {
		var out Pruned
		err := s.callRESTInto(c, s.postPrune, Prune{}, &out, "id", f.ID)
		return s.settingsResult(c, f.ID, "Pruned "+prunedWords(out)+".", err)
	}
	p := settingsPage{page: s.newPage(c, "Settings of "+f.ID), FolderID: f.ID, Retained: s.cfg.Receiver != nil}
	var saved Retention
	if err := s.callRESTInto(c, s.getRetention, nil, &saved, "id", f.ID); err != nil {
		p.RetentionError = s.errorMessage(err)
		return s.render(c, http.StatusOK, "settings.html", p)
	}
	p.Retention = saved
	req := Prune{DryRun: true}
	if _, typed := c.Request().PostForm["keepLast"]; typed {
		r, err := formRetention(c)
		if err != nil {
			p.Flash = s.errorMessage(err)
			return s.render(c, http.StatusBadRequest, "settings.html", p)
		}
		p.Retention, p.Unsaved = r, r != saved
		req.Policy = &r
	}
	var out Pruned
	if err := s.callRESTInto(c, s.postPrune, req, &out, "id", f.ID); err != nil {
		p.Flash = s.errorMessage(err)
		return s.render(c, http.StatusOK, "settings.html", p)
	}
	p.Preview = "A prune would drop " + prunedWords(out) + "."
	if out.Records == 0 && out.Chunks == 0 {
		p.Preview = fmt.Sprintf("A prune would drop nothing: all %d versions stay.", out.Kept)
	}
	return s.render(c, http.StatusOK, "settings.html", p)
}

// getPruneConfirm asks before a prune, saying what it drops.
func (s *Server) getPruneConfirm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	if f.Type != db.Encrypted {
		return s.settingsResult(c, f.ID, "", badRequest("pruning from the console applies to a receiver's encrypted folder"))
	}
	var out Pruned
	if err := s.callRESTInto(c, s.postPrune, Prune{DryRun: true}, &out, "id", f.ID); err != nil {
		return s.settingsResult(c, f.ID, "", err)
	}
	back := "/folders/" + url.PathEscape(f.ID) + "/settings"
	p := confirmPage{
		page:     s.newPage(c, "Prune "+f.ID),
		Question: fmt.Sprintf("Prune the folder %s now, with its saved retention?", f.ID),
		Note:     "It drops " + prunedWords(out) + ". What goes cannot be restored again.",
		Action:   back + "/prune", Button: "Prune now", Back: back,
	}
	if out.Records == 0 && out.Chunks == 0 {
		p.Note = fmt.Sprintf("Nothing would go: the saved retention keeps all %d versions.", out.Kept)
	}
	return s.render(c, http.StatusOK, "confirm.html", p)
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
