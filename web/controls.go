package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/engine"
)

// Everyday controls of folders and devices: rescans, pausing, renaming a
// device, a folder's type, its ignore patterns, what it still needs and
// why, and what changed recently. Each is a REST call; the console's
// forms run the same handlers.

// Controls is what the everyday controls need from the sync engine,
// which has them; an Engine without them (a test's) answers 501.
type Controls interface {
	ScanAll()
	Needed(ctx context.Context, folderID string, limit int) ([]engine.Needed, int, error)
	RecentChanges(ctx context.Context, folderID string) ([]engine.Change, error)
	Ignores(ctx context.Context, folderID string) (string, error)
	SetIgnores(ctx context.Context, folderID, text string) error
}

// NeededList is GET /rest/folders/{id}/needed: the first items a folder
// needs, and how many it needs in all.
type NeededList struct {
	Total int          `json:"total"`
	Items []NeededItem `json:"items"`
}

// NeededItem is an item a folder needs and why it is not here yet.
type NeededItem struct {
	Name string `json:"name"`
	Type string `json:"type"` // "file", "dir" or "symlink"
	Size int64  `json:"size"`
	// Action is "update" or "delete".
	Action string `json:"action"`
	// Device made the version needed; DeviceName is its name here.
	Device     string `json:"device,omitempty"`
	DeviceName string `json:"deviceName,omitempty"`
	Reason     string `json:"reason"`
	// Failed: Reason is the error of the last attempt, not a wait.
	Failed bool `json:"failed,omitempty"`
}

// ChangeList is GET /rest/folders/{id}/changes: the folder's recent
// changes since the node started, newest first.
type ChangeList struct {
	Changes []ChangeItem `json:"changes"`
}

// ChangeItem is one change to a folder's item.
type ChangeItem struct {
	Time   time.Time `json:"time"`
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	Action string    `json:"action"`
	Size   int64     `json:"size"`
	// Device made the change; DeviceName is its name here (this device's
	// own changes have Local set).
	Device     string `json:"device,omitempty"`
	DeviceName string `json:"deviceName,omitempty"`
	Local      bool   `json:"local"`
	Version    string `json:"version"`
}

// Ignores is GET and PUT /rest/folders/{id}/ignores: the folder's
// .lockstepignore as written.
type Ignores struct {
	Text string `json:"text"`
}

// RenameDevice is the body of PUT /rest/devices/{id}/name.
type RenameDevice struct {
	Name string `json:"name"`
}

// FolderType is the body of PUT /rest/folders/{id}/type.
type FolderType struct {
	Type string `json:"type"`
}

// What a folder's page lists of the items it needs and its changes.
const (
	neededOnPage  = 100
	changesOnPage = 50
)

// maxNeededListed bounds the items GET .../needed lists by default, and
// at most.
const maxNeededListed = 1000

func (s *Server) controlRoutes(r *echo.Group) {
	r.POST("/scan", s.postScanAll)
	r.POST("/folders/:id/pause", s.postFolderPause(true))
	r.POST("/folders/:id/resume", s.postFolderPause(false))
	r.PUT("/folders/:id/type", s.putFolderType)
	r.GET("/folders/:id/ignores", s.getIgnores)
	r.PUT("/folders/:id/ignores", s.putIgnores)
	r.GET("/folders/:id/needed", s.getNeeded)
	r.GET("/folders/:id/changes", s.getChanges)
	r.POST("/devices/:id/pause", s.postDevicePause(true))
	r.POST("/devices/:id/resume", s.postDevicePause(false))
	r.PUT("/devices/:id/name", s.putDeviceName)
}

func (s *Server) controlPageRoutes(g *echo.Group) {
	g.POST("/scan", s.postScanAllForm)
	g.POST("/folders/:id/scan", s.postFolderControlForm("scan"))
	g.POST("/folders/:id/pause", s.postFolderControlForm("pause"))
	g.POST("/folders/:id/resume", s.postFolderControlForm("resume"))
	g.POST("/folders/:id/type", s.postFolderControlForm("type"))
	g.POST("/folders/:id/ignores", s.postFolderControlForm("ignores"))
	g.POST("/folders/:id/unshare", s.postFolderControlForm("unshare"))
	g.POST("/devices/:id/pause", s.postDeviceControlForm("pause"))
	g.POST("/devices/:id/resume", s.postDeviceControlForm("resume"))
	g.POST("/devices/:id/rename", s.postDeviceControlForm("rename"))
}

// The node's engine has every control.
var _ Controls = (*engine.Engine)(nil)

// errNoControls: the engine has no Controls.
var errNoControls = echo.NewHTTPError(http.StatusNotImplemented, "this node's engine has no such control")

// controls is the engine's side of the controls, or errNoControls.
func (s *Server) controls() (Controls, error) {
	if c, ok := s.cfg.Engine.(Controls); ok {
		return c, nil
	}
	return nil, errNoControls
}

// controlError turns the engine's and database's errors into HTTP ones.
func controlError(id string, err error) error {
	switch {
	case errors.Is(err, engine.ErrPaused):
		return echo.NewHTTPError(http.StatusConflict, fmt.Sprintf("folder %q is paused; resume it first", id))
	case errors.Is(err, engine.ErrBadIgnores):
		return badRequest(err.Error())
	}
	return folderError(id, err)
}

func (s *Server) postScanAll(c echo.Context) error {
	ctl, err := s.controls()
	if err != nil {
		return err
	}
	ctl.ScanAll()
	return c.NoContent(http.StatusNoContent)
}

// postFolderPause pauses (or resumes) a synced folder: it stops scanning,
// pulling and sending until it is resumed, across restarts.
func (s *Server) postFolderPause(paused bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id := c.Param("id")
		f, err := s.cfg.DB.Folder(ctx, id)
		if err != nil {
			return folderError(id, err)
		}
		if f.Type == db.Encrypted {
			return badRequest(fmt.Sprintf("folder %q is held encrypted for other devices; pause the devices instead", id))
		}
		if err := s.cfg.DB.SetFolderPaused(ctx, id, paused); err != nil {
			return folderError(id, err)
		}
		if err := s.cfg.Engine.Reload(ctx); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}

func (s *Server) putFolderType(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	var req FolderType
	if err := c.Bind(&req); err != nil {
		return badRequest(`body must be {"type": "sendreceive" | "sendonly" | "receiveonly"}`)
	}
	switch t := db.FolderType(req.Type); t {
	case db.SendReceive, db.SendOnly, db.ReceiveOnly:
	case db.Encrypted:
		return badRequest("a synced folder cannot become encrypted: to back it up on an untrusted device, share it with one")
	default:
		return badRequest(fmt.Sprintf("unknown folder type %q: want sendreceive, sendonly or receiveonly", req.Type))
	}
	f, err := s.cfg.DB.Folder(ctx, id)
	if err != nil {
		return folderError(id, err)
	}
	if f.Type == db.Encrypted {
		return badRequest(fmt.Sprintf("folder %q is held encrypted for other devices and keeps its type", id))
	}
	if err := s.cfg.DB.SetFolderType(ctx, id, db.FolderType(req.Type)); err != nil {
		return folderError(id, err)
	}
	if err := s.cfg.Engine.Reload(ctx); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getIgnores(c echo.Context) error {
	id := c.Param("id")
	ctl, err := s.controls()
	if err != nil {
		return err
	}
	text, err := ctl.Ignores(c.Request().Context(), id)
	if err != nil {
		return controlError(id, err)
	}
	return c.JSON(http.StatusOK, Ignores{Text: text})
}

func (s *Server) putIgnores(c echo.Context) error {
	id := c.Param("id")
	var req Ignores
	if err := c.Bind(&req); err != nil {
		return badRequest(`body must be {"text": PATTERNS}`)
	}
	ctl, err := s.controls()
	if err != nil {
		return err
	}
	if err := ctl.SetIgnores(c.Request().Context(), id, req.Text); err != nil {
		return controlError(id, err)
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getNeeded(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	limit := maxNeededListed
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > maxNeededListed {
			return badRequest(fmt.Sprintf("limit must be 1 to %d", maxNeededListed))
		}
		limit = n
	}
	out, err := s.neededList(ctx, id, limit)
	if err != nil {
		return controlError(id, err)
	}
	return c.JSON(http.StatusOK, out)
}

// neededList is the first limit items the folder needs, with why.
func (s *Server) neededList(ctx context.Context, id string, limit int) (NeededList, error) {
	ctl, err := s.controls()
	if err != nil {
		return NeededList{}, err
	}
	need, total, err := ctl.Needed(ctx, id, limit)
	if err != nil {
		return NeededList{}, err
	}
	names := s.deviceNames(ctx)
	out := NeededList{Total: total, Items: make([]NeededItem, 0, len(need))}
	for _, n := range need {
		it := NeededItem{Name: n.Name, Type: n.Type.String(), Size: n.Size, Action: "update", Reason: n.Reason, Failed: n.Failed}
		if n.Deleted {
			it.Action = "delete"
		}
		it.Device, it.DeviceName = s.deviceOf(n.By, names)
		out.Items = append(out.Items, it)
	}
	return out, nil
}

func (s *Server) getChanges(c echo.Context) error {
	id := c.Param("id")
	out, err := s.changeList(c.Request().Context(), id)
	if err != nil {
		return controlError(id, err)
	}
	return c.JSON(http.StatusOK, out)
}

// changeList is the folder's recent changes, newest first.
func (s *Server) changeList(ctx context.Context, id string) (ChangeList, error) {
	ctl, err := s.controls()
	if err != nil {
		return ChangeList{}, err
	}
	cs, err := ctl.RecentChanges(ctx, id)
	if err != nil {
		return ChangeList{}, err
	}
	names := s.deviceNames(ctx)
	out := ChangeList{Changes: make([]ChangeItem, 0, len(cs))}
	for _, ch := range cs {
		it := ChangeItem{Time: ch.Time, Name: ch.Name, Type: ch.Type.String(), Action: ch.Action, Size: ch.Size, Local: ch.Local, Version: ch.Version}
		it.Device, it.DeviceName = s.deviceOf(ch.By, names)
		out.Changes = append(out.Changes, it)
	}
	return out, nil
}

// deviceNames maps the known devices' IDs to their names.
func (s *Server) deviceNames(ctx context.Context) map[string]string {
	names := map[string]string{}
	devs, err := s.cfg.DB.Devices(ctx)
	if err != nil {
		s.cfg.Logger.Warn("reading device names", "err", err)
		return names
	}
	for _, d := range devs {
		names[d.ID] = d.Name
	}
	return names
}

// deviceOf is a device's ID and its name ("this device" for this node's
// own), or nothing for the zero ID.
func (s *Server) deviceOf(id crypt.DeviceID, names map[string]string) (string, string) {
	if id.IsZero() {
		return "", ""
	}
	if id == s.cfg.ID {
		return id.String(), "this device"
	}
	return id.String(), names[id.String()]
}

// postDevicePause pauses (or resumes) a device: its connection is dropped
// and it is neither dialled nor let in until it is resumed, across
// restarts.
func (s *Server) postDevicePause(paused bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := crypt.ParseDeviceID(c.Param("id"))
		if err != nil {
			return badRequest(err.Error())
		}
		if err := s.cfg.DB.SetDevicePaused(c.Request().Context(), id.String(), paused); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no device %s", id))
			}
			return err
		}
		s.cfg.Conns.Reload()
		return c.NoContent(http.StatusNoContent)
	}
}

// putDeviceName sets the name this node knows a device by.
func (s *Server) putDeviceName(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := crypt.ParseDeviceID(c.Param("id"))
	if err != nil {
		return badRequest(err.Error())
	}
	var req RenameDevice
	if err := c.Bind(&req); err != nil {
		return badRequest(`body must be {"name": NAME}`)
	}
	name := strings.TrimSpace(req.Name)
	if err := checkName(name); err != nil {
		return err
	}
	if err := s.cfg.DB.RenameDevice(ctx, id.String(), name); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no device %s", id))
		}
		return err
	}
	d, err := s.cfg.DB.Device(ctx, id.String())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.deviceStatusOf(d))
}

// checkName refuses device names that are empty, too long or hold
// control characters.
func checkName(name string) error {
	if name == "" {
		return badRequest("a device needs a name")
	}
	if err := checkLabel(name); err != nil {
		return badRequest(strings.Replace(fmt.Sprint(err.(*echo.HTTPError).Message), "a label", "a name", 1))
	}
	return nil
}

// The console's forms.

// controlResult flashes what a control did (ok) or why it failed, and
// sends the browser back: to the folder's page, or the devices or folders
// list.
func (s *Server) controlResult(c echo.Context, back, ok string, err error) error {
	msg := ok
	if err != nil {
		var he *echo.HTTPError
		if !errors.As(err, &he) {
			return err
		}
		msg = s.errorMessage(err)
	}
	s.sessions.setFlash(c.Get(ctxSessionID).(string), msg)
	return c.Redirect(http.StatusSeeOther, back)
}

// backTo is where a form sends the browser afterwards: its "back" field
// when that is the devices or folders list or a folder's page, else def.
func backTo(c echo.Context, def string) string {
	switch b := c.FormValue("back"); {
	case b == "/devices", b == "/folders", b == "/":
		return b
	case strings.HasPrefix(b, "/folders/") && folderIDPattern.MatchString(strings.TrimPrefix(b, "/folders/")):
		return b
	}
	return def
}

func (s *Server) postScanAllForm(c echo.Context) error {
	return s.controlResult(c, backTo(c, "/folders"), "Rescanning every folder.", s.callREST(c, s.postScanAll, nil))
}

func (s *Server) postFolderControlForm(action string) echo.HandlerFunc {
	return func(c echo.Context) error {
		f, err := s.consoleFolder(c)
		if err != nil {
			return err
		}
		back := backTo(c, folderPath(f.ID))
		switch action {
		case "scan":
			return s.controlResult(c, back, "Rescanning folder "+f.ID+".", s.callREST(c, s.postScan, nil, "id", f.ID))
		case "pause":
			return s.controlResult(c, back, "Paused folder "+f.ID+": it neither scans nor syncs until resumed.", s.callREST(c, s.postFolderPause(true), nil, "id", f.ID))
		case "resume":
			return s.controlResult(c, back, "Resumed folder "+f.ID+".", s.callREST(c, s.postFolderPause(false), nil, "id", f.ID))
		case "type":
			t := c.FormValue("type")
			return s.controlResult(c, back, "Folder "+f.ID+" is now "+typeWords(t)+".", s.callREST(c, s.putFolderType, FolderType{Type: t}, "id", f.ID))
		case "ignores":
			// Browsers send textarea lines ending in CR LF.
			text := strings.ReplaceAll(c.FormValue("ignores"), "\r\n", "\n")
			return s.controlResult(c, back, "Saved the ignore patterns of "+f.ID+"; rescanning.", s.callREST(c, s.putIgnores, Ignores{Text: text}, "id", f.ID))
		case "unshare":
			dev := c.FormValue("device")
			return s.controlResult(c, back, "Folder "+f.ID+" is no longer shared with "+s.deviceLabel(c.Request().Context(), dev)+".", s.callREST(c, s.deleteShare, nil, "id", f.ID, "device", dev))
		}
		return echo.NewHTTPError(http.StatusNotFound, "no such control")
	}
}

func (s *Server) postDeviceControlForm(action string) echo.HandlerFunc {
	return func(c echo.Context) error {
		d, err := s.consoleDevice(c)
		if err != nil {
			return err
		}
		back := backTo(c, "/devices")
		name := s.deviceLabel(c.Request().Context(), d.ID)
		switch action {
		case "pause":
			return s.controlResult(c, back, "Paused "+name+": disconnected until resumed.", s.callREST(c, s.postDevicePause(true), nil, "id", d.ID))
		case "resume":
			return s.controlResult(c, back, "Resumed "+name+".", s.callREST(c, s.postDevicePause(false), nil, "id", d.ID))
		case "rename":
			newName := strings.TrimSpace(c.FormValue("name"))
			return s.controlResult(c, back, "Renamed "+name+" to "+newName+".", s.callREST(c, s.putDeviceName, RenameDevice{Name: newName}, "id", d.ID))
		}
		return echo.NewHTTPError(http.StatusNotFound, "no such control")
	}
}

// deviceLabel is a device's name, or its short ID when it has none.
func (s *Server) deviceLabel(ctx context.Context, id string) string {
	if d, err := s.cfg.DB.Device(ctx, id); err == nil && d.Name != "" {
		return d.Name
	}
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// typeWords says a folder type for a person.
func typeWords(t string) string {
	switch db.FolderType(t) {
	case db.SendReceive:
		return "send & receive"
	case db.SendOnly:
		return "send only"
	case db.ReceiveOnly:
		return "receive only"
	}
	return t
}

// folderControls is what a synced folder's page shows of the controls.
type folderControls struct {
	Paused       bool
	Types        []typeChoice
	Ignores      string
	IgnoresError string
	Needed       *NeededList
	NeededError  string
	Changes      []ChangeItem
	Shares       []shareRow
}

type typeChoice struct {
	Value, Words string
	Selected     bool
}

// shareRow is a device the folder is shared with, to unshare.
type shareRow struct {
	ID, Name string
}

// folderControlsOf gathers the controls of a synced folder's page; what
// fails to load says so in its place.
func (s *Server) folderControlsOf(c echo.Context, id string) *folderControls {
	ctx := c.Request().Context()
	ctl, err := s.controls()
	if err != nil {
		return nil
	}
	f, err := s.cfg.DB.Folder(ctx, id)
	if err != nil || f.Type == db.Encrypted {
		return nil
	}
	fc := &folderControls{Paused: f.Paused}
	for _, t := range []db.FolderType{db.SendReceive, db.SendOnly, db.ReceiveOnly} {
		fc.Types = append(fc.Types, typeChoice{Value: string(t), Words: typeWords(string(t)), Selected: t == f.Type})
	}
	if fc.Ignores, err = ctl.Ignores(ctx, id); err != nil {
		fc.IgnoresError = s.errorMessage(controlError(id, err))
	}
	if need, err := s.neededList(ctx, id, neededOnPage); err == nil {
		fc.Needed = &need
	} else if !errors.Is(err, engine.ErrPaused) {
		fc.NeededError = s.errorMessage(controlError(id, err))
	}
	if ch, err := s.changeList(ctx, id); err == nil {
		fc.Changes = ch.Changes
		if len(fc.Changes) > changesOnPage {
			fc.Changes = fc.Changes[:changesOnPage]
		}
	}
	devs, _ := s.cfg.DB.FolderDevices(ctx, id)
	names := s.deviceNames(ctx)
	for _, d := range devs {
		fc.Shares = append(fc.Shares, shareRow{ID: d, Name: names[d]})
	}
	return fc
}
