package web

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/check"
)

// Backup checks (sync/check): run one now, see the one under way and the
// last result, and set the folder's schedule.

// CheckRequest is the body of POST /rest/folders/{id}/check.
type CheckRequest struct {
	// Receiver limits a trusted device's check to one receiver.
	Receiver string `json:"receiver,omitempty"`
	// ReadData is "" (metadata only), "all", "N%" or a size.
	ReadData string `json:"readData,omitempty"`
	// Repair sends chunks found missing or cut short again, where this
	// device's files or another receiver have them.
	Repair bool `json:"repair,omitempty"`
}

// CheckResult answers POST /rest/folders/{id}/check.
type CheckResult struct {
	Clean   bool           `json:"clean"`
	Reports []check.Report `json:"reports"`
}

// CheckState is GET /rest/folders/{id}/check, and the check part of a
// folder's status.
type CheckState struct {
	// Running is the progress of the check under way; with read-data,
	// BytesPerSecond and SecondsLeft are its rate and time left once it
	// has been watched a moment.
	Running        *check.Progress `json:"running,omitempty"`
	BytesPerSecond float64         `json:"bytesPerSecond,omitempty"`
	SecondsLeft    int64           `json:"secondsLeft,omitempty"`
	// Last is the last check that ended.
	Last *LastCheck `json:"last,omitempty"`
	// Failed is the last check that could not run (no receiver to reach,
	// no key), when none has run since.
	Failed *check.Failure `json:"failed,omitempty"`
	// Every and ReadData are the folder's schedule; Every is empty
	// when it has none.
	Every    string `json:"every,omitempty"`
	ReadData string `json:"readData,omitempty"`
	// Overdue: the folder has a schedule and no clean check within its
	// interval (a scheduled check failed, or none ran).
	Overdue bool `json:"overdue,omitempty"`
}

// LastCheck is the last check of a folder.
type LastCheck struct {
	Finished time.Time `json:"finished"`
	Clean    bool      `json:"clean"`
	// LastClean is when a check was last clean; absent if never.
	LastClean *time.Time `json:"lastClean,omitempty"`
	Summary   string     `json:"summary"`
	// Reports are left out of a folder's status.
	Reports []check.Report `json:"reports,omitempty"`
}

// CheckSchedule is the body of PUT /rest/folders/{id}/check/schedule:
// Every empty (or "0") removes the schedule.
type CheckSchedule struct {
	Every    string `json:"every"`
	ReadData string `json:"readData,omitempty"`
}

func (s *Server) checkRoutes(r *echo.Group) {
	r.POST("/folders/:id/check", s.postCheck)
	r.GET("/folders/:id/check", s.getCheck)
	r.PUT("/folders/:id/check/schedule", s.putCheckSchedule)
}

// checks returns the node's check service, or an error for a node
// without one.
func (s *Server) checks() (*check.Service, error) {
	if s.cfg.Checks == nil {
		return nil, echo.NewHTTPError(http.StatusServiceUnavailable, "this node runs no checks")
	}
	return s.cfg.Checks, nil
}

func (s *Server) postCheck(c echo.Context) error {
	svc, err := s.checks()
	if err != nil {
		return err
	}
	id := c.Param("id")
	ctx := c.Request().Context()
	if _, err := s.cfg.DB.Folder(ctx, id); err != nil {
		return folderError(id, err)
	}
	var req CheckRequest
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	opts, err := checkOptions(req)
	if err != nil {
		return err
	}
	reps, err := svc.Run(ctx, id, opts)
	if errors.Is(err, check.ErrRunning) {
		return echo.NewHTTPError(http.StatusConflict, err.Error())
	}
	if err != nil {
		return folderError(id, err)
	}
	res := CheckResult{Clean: true, Reports: reps}
	for i := range reps {
		res.Clean = res.Clean && reps[i].Clean()
	}
	return c.JSON(http.StatusOK, res)
}

// checkOptions parses a check request.
func checkOptions(req CheckRequest) (check.RunOptions, error) {
	o := check.RunOptions{Repair: req.Repair}
	if req.Receiver != "" {
		dev, err := crypt.ParseDeviceID(req.Receiver)
		if err != nil {
			return o, badRequest("receiver: " + err.Error())
		}
		o.Receiver = dev
	}
	rd, err := check.ParseReadData(req.ReadData)
	if err != nil {
		return o, badRequest(err.Error())
	}
	o.ReadData = rd
	return o, nil
}

func (s *Server) getCheck(c echo.Context) error {
	id := c.Param("id")
	ctx := c.Request().Context()
	if _, err := s.cfg.DB.Folder(ctx, id); err != nil {
		return folderError(id, err)
	}
	st, err := s.checkState(ctx, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// checkState is the folder's check state; the zero state on a node
// without checks.
func (s *Server) checkState(ctx context.Context, id string) (CheckState, error) {
	var st CheckState
	if s.cfg.Checks == nil {
		return st, nil
	}
	if p, ok := s.cfg.Checks.Running(id); ok {
		st.Running = &p
		if p.BytesTotal > 0 {
			rate, left := s.rates.observe(checkTransfer(id), p.Bytes, p.BytesTotal)
			st.BytesPerSecond, st.SecondsLeft = rate, int64(left/time.Second)
		}
	}
	if f, ok := s.cfg.Checks.Failed(id); ok {
		st.Failed = &f
	}
	last, ok, err := s.cfg.Checks.Last(ctx, id)
	if err != nil {
		return st, err
	}
	if ok {
		l := &LastCheck{Finished: last.Finished, Clean: last.Clean, Reports: last.Reports, Summary: "clean"}
		if !last.LastClean.IsZero() {
			l.LastClean = &last.LastClean
		}
		if !last.Clean {
			l.Summary = summarize(last.Reports)
		}
		st.Last = l
	}
	sched, err := s.cfg.DB.CheckSchedules(ctx)
	if err != nil {
		return st, err
	}
	for _, sc := range sched {
		if sc.Folder != id {
			continue
		}
		st.Every, st.ReadData = check.FormatInterval(sc.Every), sc.ReadData
		st.Overdue = !ok || last.LastClean.IsZero() || time.Since(last.LastClean) > sc.Every
	}
	return st, nil
}

// summarize is the problem counts of reports in one line.
func summarize(reps []check.Report) string {
	var all check.Report
	for _, r := range reps {
		for _, p := range r.Problems {
			all.Add(p)
		}
		all.Truncated += r.Truncated
	}
	return all.Summary()
}

func (s *Server) putCheckSchedule(c echo.Context) error {
	id := c.Param("id")
	var req CheckSchedule
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	sc := db.CheckSchedule{Folder: id}
	if req.Every != "" && req.Every != "0" {
		every, err := check.ParseInterval(req.Every)
		if err != nil {
			return badRequest(err.Error())
		}
		if _, err := check.ParseReadData(req.ReadData); err != nil {
			return badRequest(err.Error())
		}
		sc.Every, sc.ReadData = every, req.ReadData
	}
	if err := s.cfg.DB.SetCheckSchedule(c.Request().Context(), sc); err != nil {
		return folderError(id, err)
	}
	return c.NoContent(http.StatusNoContent)
}

// folderCheck adds the folder's check state to fs, without the reports
// (a status is polled; GET .../check has them), and a failed last check
// to its error: it stays an error until a later check is clean.
func (s *Server) folderCheck(ctx context.Context, fs *FolderStatus) error {
	st, err := s.checkState(ctx, fs.ID)
	if err != nil {
		return err
	}
	if st.Running == nil && st.Last == nil && st.Every == "" && st.Failed == nil {
		return nil
	}
	if st.Last != nil {
		last := *st.Last
		last.Reports = nil
		st.Last = &last
	}
	fs.Check = &st
	if st.Last != nil && !st.Last.Clean && fs.Error == "" {
		fs.Error = "the last backup check found problems: " + st.Last.Summary
	}
	return nil
}

// fullCheck gives a folder's page the reports its status leaves out.
func (s *Server) fullCheck(ctx context.Context, fs *FolderStatus) error {
	if fs.Check == nil || fs.Check.Last == nil {
		return nil
	}
	st, err := s.checkState(ctx, fs.ID)
	if err != nil {
		return err
	}
	fs.Check.Last = st.Last
	return nil
}

func (s *Server) checkPageRoutes(g *echo.Group) {
	g.POST("/folders/:id/check", s.postCheckForm)
	g.POST("/folders/:id/check/schedule", s.postCheckScheduleForm)
}

// postCheckForm starts a check from the console. It runs on after the
// redirect (until the server stops); the folder page shows its progress
// and, once it ends, its result.
func (s *Server) postCheckForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	back := folderPath(f.ID)
	svc, err := s.checks()
	if err != nil {
		return s.controlResult(c, back, "", err)
	}
	opts, err := checkOptions(CheckRequest{ReadData: c.FormValue("readData"), Repair: c.FormValue("repair") == "on"})
	if err != nil {
		return s.controlResult(c, back, "", err)
	}
	if _, running := svc.Running(f.ID); running {
		return s.controlResult(c, back, "", echo.NewHTTPError(http.StatusConflict, "A check of "+f.ID+" is running already."))
	}
	go func() {
		if _, err := svc.Run(s.streamsCtx, f.ID, opts); err != nil && !errors.Is(err, check.ErrRunning) && s.streamsCtx.Err() == nil {
			s.cfg.Logger.Warn("console's check could not run", "folder", f.ID, "err", err)
		}
	}()
	return s.controlResult(c, back, "Checking folder "+f.ID+": reload this page to see how far it got and what it found.", nil)
}

func (s *Server) postCheckScheduleForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	every := strings.TrimSpace(c.FormValue("every"))
	msg := "Folder " + f.ID + " is checked every " + every + "."
	if every == "" || every == "0" {
		msg = "Folder " + f.ID + " is no longer checked on a schedule."
	}
	err = s.callREST(c, s.putCheckSchedule, CheckSchedule{Every: every, ReadData: strings.TrimSpace(c.FormValue("readData"))}, "id", f.ID)
	return s.controlResult(c, folderPath(f.ID), msg, err)
}

// checkTransfer is the key of a folder's running check among the
// transfers whose rates the console measures.
func checkTransfer(folder string) string { return "check " + folder }
