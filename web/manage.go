package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// Managing devices, offers and folders: dismissing what is pending,
// editing a folder's label, and the console's confirm steps before
// removing a device or a folder. Removing a folder forgets it; its files
// stay on disk.

// maxLabel bounds a folder label, in bytes.
const maxLabel = 256

func (s *Server) manageRESTRoutes(r *echo.Group) {
	r.POST("/pending/ignore", s.postIgnore)
	r.PATCH("/folders/:id", s.patchFolder)
	r.GET("/folders/:id/versions/download", s.getDownload)
}

func (s *Server) managePageRoutes(g *echo.Group) {
	g.GET("/fragments/device-id", s.getDeviceIDCheck)
	g.POST("/pending/ignore", s.postIgnoreForm)
	g.GET("/devices/:id/remove", s.getRemoveDevicePage)
	g.POST("/devices/:id/remove", s.postRemoveDeviceForm)
	g.GET("/devices/:id/trust", s.getTrustPage)
	g.POST("/devices/:id/trust", s.postTrustForm)
	g.POST("/folders/:id/edit", s.postEditFolderForm)
	g.GET("/folders/:id/remove", s.getRemoveFolderPage)
	g.POST("/folders/:id/remove", s.postRemoveFolderForm)
}

// postIgnore dismisses a pending device or folder offer. The device may
// ask again when it next connects; then it is pending again.
func (s *Server) postIgnore(c echo.Context) error {
	ctx := c.Request().Context()
	var req Ignore
	if err := c.Bind(&req); err != nil || req.ID == "" {
		return badRequest("body must be {\"id\": DEVICE-or-FOLDER}")
	}
	if id, err := crypt.ParseDeviceID(req.ID); err == nil {
		if err := s.cfg.DB.RemovePendingDevice(ctx, id.String()); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("device %s is not pending", id))
			}
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
	var only string
	if req.Device != "" {
		id, err := crypt.ParseDeviceID(req.Device)
		if err != nil {
			return badRequest(err.Error())
		}
		only = id.String()
	}
	offers, err := s.cfg.DB.PendingFolders(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, o := range offers {
		if o.FolderID != req.ID || only != "" && o.DeviceID != only {
			continue
		}
		if err := s.cfg.DB.RemovePendingFolder(ctx, o.DeviceID, o.FolderID); err != nil && !errors.Is(err, db.ErrNotFound) {
			return err
		}
		n++
	}
	if n == 0 {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("nothing pending is called %q", req.ID))
	}
	return c.NoContent(http.StatusNoContent)
}

// checkLabel refuses labels that are too long or hold control characters.
func checkLabel(l string) error {
	if len(l) > maxLabel {
		return badRequest(fmt.Sprintf("a label is at most %d bytes", maxLabel))
	}
	if strings.IndexFunc(l, unicode.IsControl) >= 0 {
		return badRequest("a label cannot hold control characters")
	}
	return nil
}

// patchFolder changes a folder's label.
func (s *Server) patchFolder(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	var req EditFolder
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	label := strings.TrimSpace(req.Label)
	if err := checkLabel(label); err != nil {
		return err
	}
	f, err := s.cfg.DB.Folder(ctx, id)
	if err != nil {
		return folderError(id, err)
	}
	f.Label = label
	if err := s.cfg.DB.PutFolder(ctx, f); err != nil {
		return err
	}
	if err := s.cfg.Engine.Reload(ctx); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, FolderStatus{ID: f.ID, Label: f.Label, Path: f.Path, Type: string(f.Type), State: "idle", Peers: []PeerStatus{}})
}

// deviceIDCheck is the answer of the device ID field's live check.
type deviceIDCheck struct {
	OK      bool
	Message string
}

// getDeviceIDCheck checks the "id" query as the device ID field is typed:
// a valid ID, this device's own, or the parse error.
func (s *Server) getDeviceIDCheck(c echo.Context) error {
	v := strings.TrimSpace(c.QueryParam("id"))
	out := deviceIDCheck{}
	switch id, err := crypt.ParseDeviceID(v); {
	case v == "":
	case err != nil:
		out.Message = err.Error()
	case id == s.cfg.ID:
		out.Message = "this is this device"
	default:
		out.OK, out.Message = true, "valid device ID"
	}
	return s.renderTemplate(c, http.StatusOK, "fragments.html", "device-id-check", out)
}

func (s *Server) postIgnoreForm(c echo.Context) error {
	req := Ignore{ID: c.FormValue("id"), Device: c.FormValue("device")}
	return s.formResult(c, c.FormValue("back"), "Ignored.", s.callREST(c, s.postIgnore, req))
}

// confirmPage asks before something is removed or a device's trust
// changes.
type confirmPage struct {
	page
	// Question and Note say what goes and what stays.
	Question string
	Note     string
	Action   string
	Button   string
	Back     string
	// Fields are posted with the confirmation.
	Fields []formField
}

// formField is a hidden field of a form.
type formField struct {
	Name, Value string
}

// consoleDevice returns the known device named by the request's :id.
func (s *Server) consoleDevice(c echo.Context) (db.Device, error) {
	id, err := crypt.ParseDeviceID(c.Param("id"))
	if err != nil {
		return db.Device{}, echo.NewHTTPError(http.StatusNotFound, "no such device")
	}
	d, err := s.cfg.DB.Device(c.Request().Context(), id.String())
	if errors.Is(err, db.ErrNotFound) {
		return db.Device{}, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no device %s", id))
	}
	return d, err
}

func (s *Server) getRemoveDevicePage(c echo.Context) error {
	d, err := s.consoleDevice(c)
	if err != nil {
		return err
	}
	name := d.Name
	if name == "" {
		name = d.ID
	}
	p := confirmPage{
		page:     s.newPage(c, "Remove a device"),
		Question: fmt.Sprintf("Remove the device %s (%s)?", name, d.ID),
		Note:     "It is disconnected and no longer shares any folder; the files it synced here stay.",
		Action:   "/devices/" + d.ID + "/remove", Button: "Remove device", Back: "/devices",
	}
	return s.render(c, http.StatusOK, "confirm.html", p)
}

func (s *Server) postRemoveDeviceForm(c echo.Context) error {
	d, err := s.consoleDevice(c)
	if err != nil {
		return err
	}
	return s.formResult(c, "/devices", "Device removed.", s.callREST(c, s.deleteDevice, nil, "id", d.ID))
}

// folderPath is the console path of a folder's page.
func folderPath(id string) string { return "/folders/" + url.PathEscape(id) }

func (s *Server) postEditFolderForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	err = s.callREST(c, s.patchFolder, EditFolder{Label: c.FormValue("label")}, "id", f.ID)
	msg := "Folder saved."
	if err != nil {
		msg = s.errorMessage(err)
	}
	s.sessions.setFlash(c.Get(ctxSessionID).(string), msg)
	return c.Redirect(http.StatusSeeOther, folderPath(f.ID))
}

func (s *Server) getRemoveFolderPage(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	what := f.ID
	if f.Label != "" {
		what += " (" + f.Label + ")"
	}
	p := confirmPage{
		page:     s.newPage(c, "Remove a folder"),
		Question: fmt.Sprintf("Remove the folder %s?", what),
		Note:     fmt.Sprintf("lockstep stops syncing it and forgets it. Removing never deletes files on disk: everything under %s stays where it is.", f.Path),
		Action:   folderPath(f.ID) + "/remove", Button: "Remove folder", Back: folderPath(f.ID),
	}
	return s.render(c, http.StatusOK, "confirm.html", p)
}

func (s *Server) postRemoveFolderForm(c echo.Context) error {
	f, err := s.consoleFolder(c)
	if err != nil {
		return err
	}
	return s.formResult(c, "/folders", "Folder removed; its files stay on disk.", s.callREST(c, s.deleteFolder, nil, "id", f.ID))
}
