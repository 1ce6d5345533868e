package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/storage/db"
	"lockstep/sync/receiver"
)

// receiverFolder checks that id is an encrypted folder of this node.
func (s *Server) receiverFolder(c echo.Context, id string) error {
	f, err := s.cfg.DB.Folder(c.Request().Context(), id)
	if err != nil {
		return folderError(id, err)
	}
	if f.Type != db.Encrypted || s.cfg.Receiver == nil {
		return badRequest("retention applies to an encrypted folder on the receiver that holds it; run this there")
	}
	return nil
}

func (s *Server) getRetention(c echo.Context) error {
	id := c.Param("id")
	if err := s.receiverFolder(c, id); err != nil {
		return err
	}
	p, err := s.cfg.Receiver.Retention(c.Request().Context(), id)
	if err != nil {
		return folderError(id, err)
	}
	return c.JSON(http.StatusOK, Retention{
		KeepLast: p.KeepLast, KeepHourly: p.KeepHourly, KeepDaily: p.KeepDaily, KeepWeekly: p.KeepWeekly,
		KeepMonthly: p.KeepMonthly, KeepYearly: p.KeepYearly, KeepDeletedDays: p.KeepDeletedDays,
	})
}

func (s *Server) putRetention(c echo.Context) error {
	id := c.Param("id")
	if err := s.receiverFolder(c, id); err != nil {
		return err
	}
	var req Retention
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	for _, n := range []int{req.KeepLast, req.KeepHourly, req.KeepDaily, req.KeepWeekly, req.KeepMonthly, req.KeepYearly, req.KeepDeletedDays} {
		if n < 0 {
			return badRequest("retention counts cannot be negative")
		}
	}
	p := policyOf(req)
	if err := s.cfg.Receiver.SetRetention(c.Request().Context(), id, p); err != nil {
		return folderError(id, err)
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) pruneReceiver(c echo.Context, id string, req Prune) error {
	if s.cfg.Receiver == nil {
		return badRequest("this node holds no encrypted folders")
	}
	grace := time.Hour
	if req.Grace != "" {
		g, err := time.ParseDuration(req.Grace)
		if err != nil || g < 0 {
			return badRequest("--grace: want a duration such as 1h or 30m")
		}
		grace = g
	}
	o := receiver.PruneOptions{DryRun: req.DryRun, Grace: grace}
	if req.Policy != nil {
		if !req.DryRun {
			return badRequest("a policy to try is for a dry run only; save it first to prune with it")
		}
		p := policyOf(*req.Policy)
		o.Try = &p
	}
	res, err := s.cfg.Receiver.Prune(c.Request().Context(), id, o)
	if err != nil {
		return folderError(id, err)
	}
	return c.JSON(http.StatusOK, Pruned{DryRun: req.DryRun, Records: res.Records, Files: res.Files, Chunks: res.Chunks, Bytes: res.Bytes, Kept: res.Kept})
}

// policyOf is the receiver's policy of a Retention.
func policyOf(r Retention) receiver.Policy {
	return receiver.Policy{
		KeepLast: r.KeepLast, KeepHourly: r.KeepHourly, KeepDaily: r.KeepDaily, KeepWeekly: r.KeepWeekly,
		KeepMonthly: r.KeepMonthly, KeepYearly: r.KeepYearly, KeepDeletedDays: r.KeepDeletedDays,
	}
}
