package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"lockstep/storage/db"
)

// versionsPage is the data of a folder's versions page: the folder's files
// whose names contain Query and, for the chosen file Path, its versions
// newest first.
type versionsPage struct {
	page
	FolderID string
	Query    string
	Path     string
	Matches  []db.FileRecord
	More     bool
	Versions []FileVersion
}

func (s *Server) versionPageRoutes(g *echo.Group) {
	g.GET("/folders/:id/versions", s.getVersionsPage)
	g.POST("/folders/:id/versions/restore", s.postRestoreForm)
	g.POST("/folders/:id/versions/restore-all", s.postRestoreAllForm)
}

// consoleFolder returns the folder named by the request's :id, or 404.
func (s *Server) consoleFolder(c echo.Context) (db.Folder, error) {
	id := c.Param("id")
	if !folderIDPattern.MatchString(id) {
		return db.Folder{}, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no folder %q", id))
	}
	f, err := s.cfg.DB.Folder(c.Request().Context(), id)
	if err != nil {
		return db.Folder{}, folderError(id, err)
	}
	return f, nil
}

// getVersionsPage lists the folder's files (deleted ones too, they may be
// restored), filtered by the "q" query, and the versions of "path".
func (s *Server) getVersionsPage(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	if f.Type == db.Encrypted {
		return echo.NewHTTPError(http.StatusBadRequest, "this node holds only ciphertext of this folder: browse its versions on a device that has the password")
	}
	ctx := c.Request().Context()
	p := versionsPage{page: s.newPage(c, "Versions of "+f.ID), FolderID: f.ID, Query: c.QueryParam("q"), Path: c.QueryParam("path")}
	q := strings.ToLower(p.Query)
	errFull := errors.New("full")
	err = s.cfg.DB.FilesSince(ctx, f.ID, db.LocalDevice, -1, func(r db.FileRecord) error {
		if !strings.Contains(strings.ToLower(r.Name), q) {
			return nil
		}
		if len(p.Matches) == maxListedFiles {
			p.More = true
			return errFull
		}
		p.Matches = append(p.Matches, r)
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return err
	}
	sort.Slice(p.Matches, func(i, j int) bool { return p.Matches[i].Name < p.Matches[j].Name })
	if p.Path != "" {
		if p.Versions, err = s.fileVersions(ctx, f.ID, p.Path); err != nil {
			var he *echo.HTTPError
			if !errors.As(err, &he) {
				return err
			}
			p.Flash = s.errorMessage(err)
		}
	}
	return s.render(c, http.StatusOK, "versions.html", p)
}

// postRestoreForm restores one version of a file in place through the
// REST restore handler, then shows the file's versions again with the
// outcome.
func (s *Server) postRestoreForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	path, version := c.FormValue("path"), c.FormValue("version")
	msg := fmt.Sprintf("Restored %s.", path)
	if path == "" || version == "" {
		msg = errorPrefix + "Choose a version to restore."
	} else if err := s.callREST(c, s.postRestore, Restore{Path: path, Version: version}, "id", f.ID); err != nil {
		msg = s.errorMessage(err)
	}
	s.sessions.setFlash(c.Get(ctxSessionID).(string), msg)
	back := "/folders/" + url.PathEscape(f.ID) + "/versions?path=" + url.QueryEscape(path)
	return c.Redirect(http.StatusSeeOther, back)
}

// postRestoreAllForm restores the whole folder as it was at the form's
// "at" time (datetime-local, taken as UTC) into the directory "to"
// through the REST restore handler, then shows the versions page with
// the outcome.
func (s *Server) postRestoreAllForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	to := strings.TrimSpace(c.FormValue("to"))
	var out Restored
	at, err := parseFormTime(c.FormValue("at"))
	if err == nil && to == "" {
		err = badRequest("name the directory to restore into")
	}
	if err == nil {
		err = s.callRESTInto(c, s.postRestore, Restore{All: true, At: at, To: to}, &out, "id", f.ID)
	}
	msg := fmt.Sprintf("Restored %d files as of %s into %s.", len(out.Restored), at, to)
	if err != nil {
		msg = s.errorMessage(err)
	}
	s.sessions.setFlash(c.Get(ctxSessionID).(string), msg)
	return c.Redirect(http.StatusSeeOther, "/folders/"+url.PathEscape(f.ID)+"/versions")
}
