package web

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/storage/db"
	"lockstep/sync/index"
	"lockstep/sync/versions"
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
	Versions []versionRow
	// Encrypted: the folder is held here as a receiver, without its
	// password: it has no versions to show.
	Encrypted bool
	// Current is Path as it is now; nil when this device has no record
	// of it.
	Current *currentFile
	// Why says why Path cannot be restored, when it cannot: a directory,
	// or a deleted file of which nothing was kept.
	Why string
}

// versionRow is one version of the chosen file as the page shows it.
type versionRow struct {
	FileVersion
	// Hash is a short content hash ("" when unknown), HashAbout what it
	// is a hash of.
	Hash, HashAbout string
	// Current: the same content as the file now.
	Current bool
	// SourceName names where the version is: this device, or a receiver.
	SourceName string
}

// currentFile is the chosen file as it is now.
type currentFile struct {
	Size    int64
	ModTime time.Time
	Deleted bool
	Hash    string
	// ContentID is index.ContentID of its chunks as this device has
	// indexed them.
	ContentID string
}

// maxHashed bounds the files the versions page reads to hash: a larger
// one shows no hash rather than make the page slow.
const maxHashed = 256 << 20

// shortHash is how many hex digits of a hash the page shows.
const shortHash = 12

// fileHash returns the first shortHash hex digits of the SHA-256 of the
// file at p, "" when it cannot be read or is larger than maxHashed.
func fileHash(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxHashed {
		return ""
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))[:shortHash]
}

func (s *Server) versionPageRoutes(g *echo.Group) {
	g.GET("/folders/:id/versions", s.getVersionsPage)
	g.GET("/folders/:id/versions/restore", s.getRestoreConfirm)
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
	ctx := c.Request().Context()
	p := versionsPage{page: s.newPage(c, "Versions of "+f.ID), FolderID: f.ID, Query: c.QueryParam("q"), Path: c.QueryParam("path")}
	if f.Type == db.Encrypted {
		// Said on the page, not as an API error: a link or a bookmark
		// may lead here.
		p.Encrypted = true
		return s.render(c, http.StatusOK, "versions.html", p)
	}
	q := strings.ToLower(p.Query)
	errFull := errors.New("full")
	err = s.cfg.DB.FilesSince(ctx, f.ID, db.LocalDevice, -1, func(r db.FileRecord) error {
		// A directory has no content to restore: it is no file here.
		if r.Type == db.TypeDir || !strings.Contains(strings.ToLower(r.Name), q) {
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
		if err := s.fillVersions(c, f, &p); err != nil {
			var he *echo.HTTPError
			if !errors.As(err, &he) {
				return err
			}
			p.Flash = s.errorMessage(err)
		}
	}
	return s.render(c, http.StatusOK, "versions.html", p)
}

// fillVersions loads p.Path as it is now and its versions, here and on
// the folder's connected receivers, newest first; or says why it has
// none to restore.
func (s *Server) fillVersions(c echo.Context, f db.Folder, p *versionsPage) error {
	ctx := c.Request().Context()
	rec, err := s.cfg.DB.File(ctx, f.ID, db.LocalDevice, p.Path)
	switch {
	case err == nil && rec.Type == db.TypeDir:
		p.Why = fmt.Sprintf("%s is a directory: only files have versions. Open one of the files in it.", p.Path)
		return nil
	case err == nil:
		p.Current = &currentFile{Size: rec.Size, ModTime: rec.ModTime, Deleted: rec.Deleted}
		if !rec.Deleted {
			p.Current.Hash = fileHash(filepath.Join(f.Path, filepath.FromSlash(p.Path)))
			// A receiver's versions are compared by their chunks.
			p.Current.ContentID, _ = index.ContentIDOf(rec)
		}
	case !errors.Is(err, db.ErrNotFound):
		return err
	}
	local, err := s.cfg.Engine.Versions(ctx, f.ID, p.Path)
	if err != nil {
		return folderError(f.ID, err)
	}
	remote, err := s.cfg.Backup.ReceiverVersions(ctx, f.ID, p.Path)
	if err != nil {
		return folderError(f.ID, err)
	}
	for _, v := range local {
		if v.Path != p.Path {
			continue
		}
		r := versionRow{
			FileVersion: FileVersion{Path: v.Path, Version: v.ID, Time: v.Time, Size: v.Size, Source: "local"},
			Hash:        fileHash(filepath.Join(f.Path, filepath.FromSlash(versions.Dir), filepath.FromSlash(v.ID))),
			HashAbout:   "SHA-256 of the content", SourceName: "this device",
		}
		r.Current = r.Hash != "" && p.Current != nil && r.Hash == p.Current.Hash
		p.Versions = append(p.Versions, r)
	}
	for _, v := range remote {
		if v.Path != p.Path {
			continue
		}
		r := versionRow{
			FileVersion: FileVersion{Path: v.Path, Version: v.ID, Time: v.Stored, Size: v.Size, Deleted: v.Deleted, Source: v.Receiver.String()},
			HashAbout:   "SHA-256 of the chunk list: the same content has the same hash on every receiver",
			SourceName:  s.deviceShown(ctx, v.Receiver.String()),
		}
		if id := v.ContentID(); id != "" {
			r.Hash = id[:shortHash]
			r.Current = p.Current != nil && id == p.Current.ContentID
		}
		p.Versions = append(p.Versions, r)
	}
	slices.SortStableFunc(p.Versions, func(a, b versionRow) int { return b.Time.Compare(a.Time) })
	restorable := false
	for _, v := range p.Versions {
		restorable = restorable || !v.Deleted
	}
	if (p.Current == nil || p.Current.Deleted) && !restorable {
		p.Why = s.whyNothingKept(c, f, p.Path)
	}
	return nil
}

// whyNothingKept says why a deleted file has no version to restore.
func (s *Server) whyNothingKept(c echo.Context, f db.Folder, name string) string {
	ctx := c.Request().Context()
	why := []string{}
	if pol, err := s.cfg.Engine.Versioning(ctx, f.ID); err == nil && typeOrNone(pol.Type) == versions.None {
		why = append(why, "versioning is off for this folder, so this device kept no copy when it was deleted (turn it on in the folder's settings for the next time)")
	} else if err == nil {
		why = append(why, "this device kept no copy of it, or its versions were cleaned up since")
	}
	receivers, connected := 0, 0
	live := map[string]bool{}
	for _, ci := range s.cfg.Conns.Connections() {
		live[ci.ID.String()] = true
	}
	if devs, err := s.cfg.DB.FolderDevices(ctx, f.ID); err == nil {
		for _, id := range devs {
			if d, err := s.cfg.DB.Device(ctx, id); err == nil && d.Untrusted {
				receivers++
				if live[id] {
					connected++
				}
			}
		}
	}
	switch {
	case receivers == 0:
		why = append(why, "no receiver backs this folder up")
	case connected == 0:
		why = append(why, "none of its receivers is connected now, so what they hold cannot be listed: try again once one is")
	default:
		why = append(why, "its receivers hold no version of it")
	}
	return fmt.Sprintf("%s was deleted and cannot be restored: %s.", name, strings.Join(why, "; "))
}

// getRestoreConfirm asks before a version replaces the file in place,
// saying which version and what becomes of the file as it is now.
func (s *Server) getRestoreConfirm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	p := versionsPage{page: s.newPage(c, "Restore a version"), FolderID: f.ID, Path: c.QueryParam("path")}
	back := "/folders/" + url.PathEscape(f.ID) + "/versions?path=" + url.QueryEscape(p.Path)
	if f.Type == db.Encrypted || p.Path == "" {
		return c.Redirect(http.StatusSeeOther, back)
	}
	if err := s.fillVersions(c, f, &p); err != nil {
		var he *echo.HTTPError
		if !errors.As(err, &he) {
			return err
		}
		s.sessions.setFlash(c.Get(ctxSessionID).(string), s.errorMessage(err))
		return c.Redirect(http.StatusSeeOther, back)
	}
	version := c.QueryParam("version")
	for _, v := range p.Versions {
		if v.Version != version || v.Deleted {
			continue
		}
		what := fmt.Sprintf("the version of %s from %s (%s, %s", p.Path, v.Time.UTC().Format("2006-01-02 15:04:05 UTC"), formatBytes(v.Size), v.SourceName)
		if v.Hash != "" {
			what += ", " + v.Hash
		}
		q := confirmPage{
			page:     p.page,
			Question: fmt.Sprintf("Restore %s) in place?", what),
			Note:     "It replaces the file in the folder, and syncs to the folder's other devices like any change.",
			Action:   "/folders/" + url.PathEscape(f.ID) + "/versions/restore", Button: "Restore", Back: back,
			Fields: []formField{{"path", p.Path}, {"version", version}},
		}
		switch {
		case v.Current:
			q.Note = "The file is like this version already. " + q.Note
		case p.Current != nil && !p.Current.Deleted:
			q.Note += fmt.Sprintf(" The file as it is now (%s, modified %s) is kept among the versions.", formatBytes(p.Current.Size), p.Current.ModTime.UTC().Format("2006-01-02 15:04:05 UTC"))
		}
		return s.render(c, http.StatusOK, "confirm.html", q)
	}
	s.sessions.setFlash(c.Get(ctxSessionID).(string), errorPrefix+"That version is not there (any more): choose one of the list.")
	return c.Redirect(http.StatusSeeOther, back)
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
	switch {
	case err != nil:
		msg = s.errorMessage(err)
	case len(out.Restored) == 0:
		msg = fmt.Sprintf("%sNothing to restore: no file of %s had a version kept at %s. Choose a later time.", errorPrefix, f.ID, at)
	}
	s.sessions.setFlash(c.Get(ctxSessionID).(string), msg)
	return c.Redirect(http.StatusSeeOther, "/folders/"+url.PathEscape(f.ID)+"/versions")
}
