package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/engine"
	"lockstep/sync/receiver"
	"lockstep/sync/versions"
)

func (s *Server) versionRoutes(r *echo.Group) {
	r.GET("/folders/:id/versioning", s.getVersioning)
	r.PUT("/folders/:id/versioning", s.putVersioning)
	r.GET("/folders/:id/versions", s.getVersions)
	r.POST("/folders/:id/restore", s.postRestore)
	r.POST("/folders/:id/prune", s.postPrune)
	r.GET("/folders/:id/retention", s.getRetention)
	r.PUT("/folders/:id/retention", s.putRetention)
}

// folderError maps the engine's and the store's errors about a folder to
// HTTP errors.
func folderError(id string, err error) error {
	switch {
	case errors.Is(err, engine.ErrNoFolder), errors.Is(err, db.ErrNotFound):
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no folder %q", id))
	case errors.Is(err, receiver.ErrNotHeld):
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("this node holds no encrypted folder %q", id))
	case errors.Is(err, versions.ErrInvalidPolicy), errors.Is(err, versions.ErrInvalidID), errors.Is(err, receiver.ErrInvalidPolicy):
		return badRequest(err.Error())
	case errors.Is(err, fs.ErrNotExist):
		return echo.NewHTTPError(http.StatusNotFound, err.Error())
	}
	return err
}

func (s *Server) getVersioning(c echo.Context) error {
	id := c.Param("id")
	p, err := s.cfg.Engine.Versioning(c.Request().Context(), id)
	if err != nil {
		return folderError(id, err)
	}
	return c.JSON(http.StatusOK, Versioning{Type: string(typeOrNone(p.Type)), Keep: p.Keep, Days: p.Days})
}

// typeOrNone names the zero type "none".
func typeOrNone(t versions.Type) versions.Type {
	if t == "" {
		return versions.None
	}
	return t
}

func (s *Server) putVersioning(c echo.Context) error {
	id := c.Param("id")
	var req Versioning
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	p, err := versions.ParsePolicy(req.Type, req.Keep, req.Days)
	if err != nil {
		return badRequest(err.Error())
	}
	if err := s.cfg.Engine.SetVersioning(c.Request().Context(), id, p); err != nil {
		return folderError(id, err)
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getVersions(c echo.Context) error {
	id := c.Param("id")
	out, err := s.fileVersions(c.Request().Context(), id, c.QueryParam("path"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// fileVersions lists the versions of path ("" for every file) kept here
// and on the folder's connected receivers, newest first.
func (s *Server) fileVersions(ctx context.Context, id, path string) ([]FileVersion, error) {
	vs, err := s.cfg.Engine.Versions(ctx, id, path)
	if err != nil {
		return nil, folderError(id, err)
	}
	rvs, err := s.cfg.Backup.ReceiverVersions(ctx, id, path)
	if err != nil {
		return nil, folderError(id, err)
	}
	out := make([]FileVersion, 0, len(vs)+len(rvs))
	for _, v := range vs {
		out = append(out, FileVersion{Path: v.Path, Version: v.ID, Time: v.Time, Size: v.Size, Source: "local"})
	}
	for _, v := range rvs {
		out = append(out, FileVersion{Path: v.Path, Version: v.ID, Time: v.Stored, Size: v.Size, Deleted: v.Deleted, Source: v.Receiver.String()})
	}
	slices.SortStableFunc(out, func(a, b FileVersion) int { return b.Time.Compare(a.Time) })
	return out, nil
}

func (s *Server) postRestore(c echo.Context) error {
	id := c.Param("id")
	ctx := c.Request().Context()
	var req Restore
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	var at time.Time
	if req.At != "" {
		t, err := time.Parse(time.RFC3339, req.At)
		if err != nil {
			return badRequest(fmt.Sprintf("--at %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", req.At))
		}
		at = t
	}
	switch {
	case req.All && (req.At == "" || req.To == ""):
		return badRequest("--all needs --at and --to")
	case req.All:
		return s.restoreAll(c, id, at, req.To)
	case req.Path == "":
		return badRequest("name the file to restore")
	case req.Version != "" && req.At != "":
		return badRequest("give --version or --at, not both")
	}
	rvs, err := s.cfg.Backup.ReceiverVersions(ctx, id, req.Path)
	if err != nil {
		return folderError(id, err)
	}
	if backup.IsReceiverVersion(req.Version) {
		for _, v := range rvs {
			if v.ID == req.Version {
				return s.restoreFromReceiver(c, id, []backup.ReceiverVersion{v}, req.To)
			}
		}
		return echo.NewHTTPError(http.StatusNotFound, "no connected receiver holds that version")
	}
	if req.At != "" {
		if v, ok := receiverPick(rvs, at); ok {
			return s.restoreFromReceiver(c, id, []backup.ReceiverVersion{v}, req.To)
		}
	}
	version := req.Version
	if version == "" {
		vs, err := s.cfg.Engine.Versions(ctx, id, req.Path)
		if err != nil {
			return folderError(id, err)
		}
		if version, err = pickVersion(vs, req.At != "", at); err != nil {
			return err
		}
	}
	where, err := s.cfg.Engine.RestoreVersion(ctx, id, version, req.To)
	if err != nil {
		return folderError(id, err)
	}
	return c.JSON(http.StatusOK, Restored{Restored: []string{where}})
}

// receiverPick chooses among a file's receiver versions (newest first)
// the one current at a time: the newest stored by then, unless that is a
// deletion.
func receiverPick(rvs []backup.ReceiverVersion, at time.Time) (backup.ReceiverVersion, bool) {
	for _, v := range rvs {
		if v.Stored.After(at) {
			continue
		}
		if v.Deleted {
			return backup.ReceiverVersion{}, false
		}
		return v, true
	}
	return backup.ReceiverVersion{}, false
}

// restoreAll writes the whole folder as it was at a time, from a receiver.
func (s *Server) restoreAll(c echo.Context, id string, at time.Time, to string) error {
	rvs, err := s.cfg.Backup.ReceiverVersions(c.Request().Context(), id, "")
	if err != nil {
		return folderError(id, err)
	}
	if len(rvs) == 0 {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "no connected receiver holds versions of this folder")
	}
	byPath := map[string]backup.ReceiverVersion{}
	for _, v := range rvs { // newest first: the first at or before at wins
		if _, done := byPath[v.Path]; done || v.Stored.After(at) {
			continue
		}
		byPath[v.Path] = v
	}
	var pick []backup.ReceiverVersion
	for _, v := range byPath {
		if !v.Deleted {
			pick = append(pick, v)
		}
	}
	slices.SortFunc(pick, func(a, b backup.ReceiverVersion) int { return strings.Compare(a.Path, b.Path) })
	return s.restoreFromReceiver(c, id, pick, to)
}

func (s *Server) restoreFromReceiver(c echo.Context, id string, vs []backup.ReceiverVersion, to string) error {
	done, err := s.cfg.Backup.RestoreFromReceiver(c.Request().Context(), id, vs, to)
	if err != nil {
		return folderError(id, err)
	}
	return c.JSON(http.StatusOK, Restored{Restored: append([]string{}, done...)})
}

// pickVersion chooses the local version to restore from vs (newest
// first): the newest, or with at, the version that was current at that
// time — the first one archived after it (a version is archived when it
// stops being current).
func pickVersion(vs []versions.Version, hasAt bool, at time.Time) (string, error) {
	if len(vs) == 0 {
		return "", echo.NewHTTPError(http.StatusNotFound, "no kept versions of that file here; see `versions` for those on receivers and give --version")
	}
	if !hasAt {
		return vs[0].ID, nil
	}
	pick := ""
	for _, v := range vs { // newest first: the last one after at is the earliest
		if v.Time.After(at) {
			pick = v.ID
		}
	}
	if pick == "" {
		return "", echo.NewHTTPError(http.StatusConflict, "the file has not changed since then: the current one is the version at that time")
	}
	return pick, nil
}

func (s *Server) postPrune(c echo.Context) error {
	id := c.Param("id")
	ctx := c.Request().Context()
	var req Prune
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	f, err := s.cfg.DB.Folder(ctx, id)
	if err != nil {
		return folderError(id, err)
	}
	if f.Type == db.Encrypted {
		return s.pruneReceiver(c, id, req)
	}
	if req.DryRun {
		return badRequest("--dry-run is for receivers; on this device prune cleans local versions")
	}
	gone, err := s.cfg.Engine.CleanVersions(ctx, id)
	if err != nil {
		return folderError(id, err)
	}
	out := Pruned{Versions: []FileVersion{}}
	for _, v := range gone {
		out.Versions = append(out.Versions, FileVersion{Path: v.Path, Version: v.ID, Time: v.Time, Size: v.Size, Source: "local"})
		out.Bytes += v.Size
	}
	return c.JSON(http.StatusOK, out)
}
