package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/skip2/go-qrcode"

	"lockstep/crypt"
	"lockstep/storage/blob/metered"
	"lockstep/storage/db"
)

// maxListedFiles bounds the file list of a folder page.
const maxListedFiles = 1000

func (s *Server) pageRoutes(g *echo.Group) {
	g.GET("/", s.getDashboard)
	g.GET("/devices", s.getDevicesPage)
	g.GET("/folders", s.getFoldersPage)
	g.GET("/folders/:id", s.getFolderPage)
	g.GET("/qr.png", s.getQR)
	g.GET("/fragments/devices", s.getDevicesFragment)
	g.GET("/fragments/folders", s.getFoldersFragment)
	// The page script's probe while the node seems gone: 204 while the
	// session lives, 401 with HX-Redirect once it has not.
	g.GET("/fragments/alive", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	g.POST("/devices", s.postDeviceForm)
	g.POST("/pending/accept", s.postAcceptForm)
	g.POST("/folders", s.postFolderForm)
	g.POST("/folders/share", s.postShareForm)
	s.versionPageRoutes(g)
	s.settingsPageRoutes(g)
	s.managePageRoutes(g)
	s.controlPageRoutes(g)
	s.checkPageRoutes(g)
	s.downloadRoutes(g)
}

var templateFuncs = template.FuncMap{
	"bytes": formatBytes,
	"percent": func(done, total int64) int64 {
		if total <= 0 {
			return 0
		}
		return done * 100 / total
	},
	"pct": func(f float64) string { return fmt.Sprintf("%.0f%%", f) },
	"ago": func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return time.Since(*t).Round(time.Second).String() + " ago"
	},
	"versioningTypes": func() []string { return versioningTypes },
	"flashOf":         readFlash,
	"rate":            func(bps float64) string { return formatBytes(int64(bps)) + "/s" },
	"left":            timeLeft,
	"count": func(n int64, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	},
	"short": func(id string) string {
		if i := strings.IndexByte(id, '-'); i > 0 {
			return id[:i]
		}
		return id
	},
}

// formatBytes renders n with a binary unit.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// page is what every console page gets.
type page struct {
	Title    string
	DeviceID string
	CSRF     string
	Flash    string
	Devices  []DeviceStatus
	Folders  []FolderStatus
	Pending  Pending
	Folder   *FolderStatus
	Files    []db.FileRecord
	More     bool
	// Discovery is nil on a node without discovery.
	Discovery *DiscoveryStatus
	// Live tells console.js how to keep the page's panels fresh.
	Live live
	// Names are the known devices' names by ID.
	Names map[string]string
	// Store and StoreUsage describe the blob store and its calls since
	// start, for a node that holds encrypted folders.
	Store      string
	StoreUsage *metered.Snapshot
}

// live is how a page's panels follow the node: the event stream from
// EventsSince on, refreshing a panel when an event it names arrives, and a
// poll every PollMS milliseconds while the stream is down. Without a
// stream (EventsURL empty) the poll is all there is.
type live struct {
	EventsURL   string
	EventsSince int64
	PollMS      int64
}

// Polls of the console's panels: while the event stream is down, and on a
// node without one, where polling is the only way to stay fresh.
const (
	defaultFallbackPoll = 10 * time.Second
	noStreamPoll        = 2 * time.Second
)

// live returns how the console's pages follow the node now.
func (s *Server) live() live {
	if s.cfg.Events == nil {
		return live{PollMS: noStreamPoll.Milliseconds()}
	}
	poll := s.fallbackPoll
	if poll == 0 {
		poll = defaultFallbackPoll
	}
	// The page shows the node as it is now; the stream starts from here,
	// so nothing published while the page loads is missed.
	return live{EventsURL: "/rest/events", EventsSince: s.cfg.Events.Latest(), PollMS: poll.Milliseconds()}
}

func (s *Server) newPage(c echo.Context, title string) page {
	sess, _ := c.Get(ctxSession).(session)
	sid, _ := c.Get(ctxSessionID).(string)
	return page{Title: title, DeviceID: s.cfg.ID.String(), CSRF: sess.csrf, Flash: s.sessions.takeFlash(sid), Live: s.live()}
}

// fill loads the devices, folders and pending lists into p.
func (s *Server) fill(c echo.Context, p *page) error {
	var err error
	if p.Devices, err = s.deviceStatus(c); err != nil {
		return err
	}
	p.Names = map[string]string{}
	for _, d := range p.Devices {
		if d.Name != "" {
			p.Names[d.ID] = d.Name
		}
	}
	if p.Folders, err = s.folderStatuses(c.Request().Context()); err != nil {
		return err
	}
	sort.Slice(p.Folders, func(i, j int) bool { return p.Folders[i].ID < p.Folders[j].ID })
	ctx := c.Request().Context()
	devs, err := s.cfg.DB.PendingDevices(ctx)
	if err != nil {
		return err
	}
	for _, d := range devs {
		p.Pending.Devices = append(p.Pending.Devices, PendingDevice{ID: d.ID, Name: d.Name, Address: d.Address, FirstSeen: d.FirstSeen, LastSeen: d.LastSeen})
	}
	offers, err := s.cfg.DB.PendingFolders(ctx)
	if err != nil {
		return err
	}
	for _, f := range offers {
		p.Pending.Folders = append(p.Pending.Folders, PendingFolder{Device: f.DeviceID, Folder: f.FolderID, Label: f.Label, FirstSeen: f.FirstSeen, Encrypted: f.Encrypted})
	}
	p.Discovery = s.discoveryStatus(p.Devices)
	for _, f := range p.Folders {
		if f.Receiver != nil {
			p.Store, p.StoreUsage = s.cfg.Store, s.storeUsage()
		}
	}
	return nil
}

func (s *Server) fullPage(c echo.Context, title, tmpl string) error {
	p := s.newPage(c, title)
	if err := s.fill(c, &p); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, tmpl, p)
}

func (s *Server) getDashboard(c echo.Context) error {
	return s.fullPage(c, "Dashboard", "dashboard.html")
}

func (s *Server) getDevicesPage(c echo.Context) error {
	return s.fullPage(c, "Devices", "devices.html")
}

func (s *Server) getFoldersPage(c echo.Context) error {
	return s.fullPage(c, "Folders", "folders.html")
}

func (s *Server) getDevicesFragment(c echo.Context) error {
	p := s.newPage(c, "")
	if err := s.fill(c, &p); err != nil {
		return err
	}
	return s.renderTemplate(c, http.StatusOK, "fragments.html", "devices", p)
}

func (s *Server) getFoldersFragment(c echo.Context) error {
	p := s.newPage(c, "")
	if err := s.fill(c, &p); err != nil {
		return err
	}
	return s.renderTemplate(c, http.StatusOK, "fragments.html", "folders", p)
}

// folderPage is a folder's page: its files on a trusted device; on a
// receiver holding it encrypted, the receiver's figures and retention.
type folderPage struct {
	page
	Encrypted      bool
	Retention      *Retention
	RetentionError string
	// Controls are a synced folder's everyday controls (controls.go).
	Controls *folderControls
	// HasReceivers: the folder is shared with an untrusted receiver, so
	// its backups can be checked.
	HasReceivers bool
}

// getFolderPage shows one folder and the files this device has in it.
func (s *Server) getFolderPage(c echo.Context) error {
	ctx := c.Request().Context()
	p := folderPage{page: s.newPage(c, "Folder")}
	if err := s.fill(c, &p.page); err != nil {
		return err
	}
	for i := range p.Folders {
		if p.Folders[i].ID == c.Param("id") {
			p.Folder = &p.Folders[i]
		}
	}
	if p.Folder == nil {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no folder %q", c.Param("id")))
	}
	p.Title = "Folder " + p.Folder.ID
	if p.Folder.Label != "" {
		p.Title += " · " + p.Folder.Label
	}
	if p.Folder.Type == string(db.Encrypted) {
		p.Encrypted = true
		if err := s.fullCheck(ctx, p.Folder); err != nil {
			return err
		}
		if s.cfg.Receiver != nil {
			var r Retention
			if err := s.callRESTInto(c, s.getRetention, nil, &r, "id", p.Folder.ID); err != nil {
				p.RetentionError = s.errorMessage(err)
			} else {
				p.Retention = &r
			}
		}
		return s.render(c, http.StatusOK, "folder.html", p)
	}
	errFull := errors.New("full")
	err := s.cfg.DB.FilesSince(ctx, p.Folder.ID, db.LocalDevice, -1, func(f db.FileRecord) error {
		if f.Deleted {
			return nil
		}
		if len(p.Files) == maxListedFiles {
			p.More = true
			return errFull
		}
		p.Files = append(p.Files, f)
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return err
	}
	sort.Slice(p.Files, func(i, j int) bool { return p.Files[i].Name < p.Files[j].Name })
	if err := s.fullCheck(ctx, p.Folder); err != nil {
		return err
	}
	p.Controls = s.folderControlsOf(c, p.Folder.ID)
	for _, peer := range p.Folder.Peers {
		p.HasReceivers = p.HasReceivers || peer.Untrusted
	}
	return s.render(c, http.StatusOK, "folder.html", p)
}

// getQR is this device's ID as a QR code.
func (s *Server) getQR(c echo.Context) error {
	png, err := qrcode.Encode(s.cfg.ID.String(), qrcode.Medium, 256)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "image/png", png)
}

// The form handlers reuse the REST handlers, then redirect back with the
// outcome as a flash message.

func (s *Server) postDeviceForm(c echo.Context) error {
	req := AddDevice{ID: strings.TrimSpace(c.FormValue("id")), Name: strings.TrimSpace(c.FormValue("name")), Untrusted: c.FormValue("untrusted") != ""}
	if a := strings.TrimSpace(c.FormValue("address")); a != "" {
		req.Addresses = []string{a}
	} else {
		req.Addresses = []string{"dynamic"}
	}
	var added DeviceStatus
	err := s.callRESTInto(c, s.postDevice, req, &added)
	return s.formResult(c, "/devices", fmt.Sprintf("Added device %s as %s.", shownName(added.Name, added.ID), trustWord(added.Untrusted)), err)
}

// postAcceptForm accepts a pending device, with the name and the trust
// the form gives it, or a folder offer.
func (s *Server) postAcceptForm(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.FormValue("id")
	if dev, err := crypt.ParseDeviceID(id); err == nil {
		pend, err := s.findPendingDevice(c, dev.String())
		if err != nil {
			return s.formResult(c, "/devices", "", err)
		}
		name := strings.TrimSpace(c.FormValue("name"))
		if _, set := c.Request().PostForm["name"]; !set {
			name = pend.Name
		}
		var untrusted bool
		switch c.FormValue("trust") {
		case "trusted":
		case "untrusted":
			untrusted = true
		default:
			return s.formResult(c, "/devices", "", badRequest("choose whether the device is trusted (it gets your files) or untrusted (it gets only encrypted data)"))
		}
		req := AddDevice{ID: pend.ID, Name: name, Addresses: []string{"dynamic"}, Untrusted: untrusted, Trusted: !untrusted}
		err = s.callREST(c, s.postDevice, req)
		return s.formResult(c, "/devices", fmt.Sprintf("Accepted device %s as %s.", shownName(name, pend.ID), trustWord(untrusted)), err)
	}
	// Who offered it, for the message: the offers go once accepted.
	var from []string
	if offers, err := s.cfg.DB.PendingFolders(ctx); err == nil {
		for _, o := range offers {
			if o.FolderID == id {
				from = append(from, s.deviceShown(ctx, o.DeviceID))
			}
		}
	}
	req := Accept{ID: id, Path: strings.TrimSpace(c.FormValue("path"))}
	msg := fmt.Sprintf("Accepted folder %s from %s.", id, strings.Join(from, ", "))
	return s.formResult(c, "/folders", msg, s.callREST(c, s.postAccept, req))
}

func (s *Server) postFolderForm(c echo.Context) error {
	req := AddFolder{ID: strings.TrimSpace(c.FormValue("id")), Label: c.FormValue("label"), Path: strings.TrimSpace(c.FormValue("path")), Type: c.FormValue("type")}
	return s.formResult(c, "/folders", fmt.Sprintf("Added folder %s at %s.", req.ID, req.Path), s.callREST(c, s.postFolder, req))
}

// postShareForm shares a folder with a device; with an untrusted device
// only with the folder password, typed twice alike.
func (s *Server) postShareForm(c echo.Context) error {
	ctx := c.Request().Context()
	folder, device := c.FormValue("folder"), c.FormValue("device")
	req := ShareFolder{Device: device, Password: c.FormValue("password")}
	var err error
	untrusted := false
	if id, perr := crypt.ParseDeviceID(device); perr == nil {
		if d, derr := s.cfg.DB.Device(ctx, id.String()); derr == nil {
			untrusted = d.Untrusted
		}
	}
	switch {
	case untrusted && req.Password == "":
		err = badRequest("enter the folder password: the untrusted device gets only data encrypted with it")
	case untrusted && req.Password != c.FormValue("password2"):
		err = badRequest("the two passwords differ: type the same folder password twice")
	default:
		err = s.callREST(c, s.postShare, req, "id", folder)
	}
	msg := fmt.Sprintf("Shared folder %s with %s.", folder, s.deviceShown(ctx, device))
	if untrusted {
		msg = fmt.Sprintf("Shared folder %s with %s, encrypted: it gets only data encrypted with the password.", folder, s.deviceShown(ctx, device))
	}
	return s.formResult(c, "/folders", msg, err)
}

// shownName is how a message names a device: its name, else its short ID.
func shownName(name, id string) string {
	if name != "" {
		return name
	}
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// deviceShown names the known device id for a message.
func (s *Server) deviceShown(ctx context.Context, id string) string {
	if d, err := s.cfg.DB.Device(ctx, id); err == nil {
		return shownName(d.Name, d.ID)
	}
	return shownName("", id)
}

func trustWord(untrusted bool) string {
	if untrusted {
		return "untrusted"
	}
	return "trusted"
}

// formResult flashes ok or err's message and redirects to back (a console
// path; anything else goes to the dashboard).
func (s *Server) formResult(c echo.Context, back, ok string, err error) error {
	msg := ok
	if err != nil {
		var he *echo.HTTPError
		if !errors.As(err, &he) {
			return err
		}
		msg = s.errorMessage(err)
	}
	s.sessions.setFlash(c.Get(ctxSessionID).(string), msg)
	if back != "/devices" && back != "/folders" {
		back = "/"
	}
	return c.Redirect(http.StatusSeeOther, back)
}

// callREST runs a REST handler in process with body as its JSON request
// and params as path parameters (name, value, ...); its response is
// dropped, its error returned.
func (s *Server) callREST(c echo.Context, h echo.HandlerFunc, body any, params ...string) error {
	return s.callRESTInto(c, h, body, nil, params...)
}

// callRESTInto is callREST that decodes a successful JSON response into
// out (when out is not nil).
func (s *Server) callRESTInto(c echo.Context, h echo.HandlerFunc, body, out any, params ...string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(c.Request().Context(), http.MethodPost, c.Request().URL.Path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w := &recordWriter{header: http.Header{}}
	ec := s.echo.NewContext(req, w)
	var names, values []string
	for i := 0; i+1 < len(params); i += 2 {
		names, values = append(names, params[i]), append(values, params[i+1])
	}
	ec.SetParamNames(names...)
	ec.SetParamValues(values...)
	if err := h(ec); err != nil {
		return err
	}
	if w.code >= 400 {
		return echo.NewHTTPError(w.code, http.StatusText(w.code))
	}
	if out != nil {
		if err := json.Unmarshal(w.body.Bytes(), out); err != nil {
			return fmt.Errorf("decoding the response: %w", err)
		}
	}
	return nil
}

// recordWriter is an http.ResponseWriter that keeps the status and body.
type recordWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *recordWriter) Header() http.Header         { return w.header }
func (w *recordWriter) Write(p []byte) (int, error) { return w.body.Write(p) }
func (w *recordWriter) WriteHeader(code int)        { w.code = code }

// errorPrefix marks a flash message as an error; the page shows it in the
// error style, without the prefix.
const errorPrefix = "Error: "

// flash is a flash message as a page shows it.
type flash struct {
	Text  string
	Error bool
}

// readFlash reads a flash message: nil for none.
func readFlash(msg string) *flash {
	if msg == "" {
		return nil
	}
	if t, ok := strings.CutPrefix(msg, errorPrefix); ok {
		return &flash{Text: t, Error: true}
	}
	return &flash{Text: msg}
}

// pageWording rewrites what the REST API says for the CLI (its flags and
// commands) in the words of the console's forms.
var pageWording = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`sharing with an untrusted device needs a password \(--password-file\)`), "enter the folder password: the untrusted device gets only data encrypted with it"},
	{regexp.MustCompile(`give the folder a path \(--path\)`), "enter where the folder goes: a path on this machine"},
	{regexp.MustCompile(`confirm that it may \('lockstep device set [^']*', or "confirm": true\)`), "confirm that it may on its Make trusted page"},
	{regexp.MustCompile(`to make it trusted, which gives it plaintext, run 'lockstep device set [^']*'`), "to make it trusted, which gives it plaintext, use its Make trusted link"},
	{regexp.MustCompile(`to make it untrusted run 'lockstep device set [^']*'`), "to make it untrusted use its Make untrusted link"},
	{regexp.MustCompile(`add it with --untrusted, then, if it is to get plaintext, run 'lockstep device set [^']*'`), "add it as untrusted, then, if it is to get plaintext, use its Make trusted link"},
	{regexp.MustCompile(`; see ` + "`versions`" + ` for those on receivers and give --version`), ""},
	{regexp.MustCompile(` \(--[a-z-]+(?: [A-Z]+)?\)`), ""},
}

// pageWords is msg in the console's words, starting with a capital.
func pageWords(msg string) string {
	for _, w := range pageWording {
		msg = w.re.ReplaceAllString(msg, w.with)
	}
	if r, size := utf8.DecodeRuneInString(msg); r != utf8.RuneError && unicode.IsLower(r) {
		msg = string(unicode.ToUpper(r)) + msg[size:]
	}
	return msg
}

// timeLeft says how long a transfer still takes, roughly.
func timeLeft(secs int64) string {
	d := time.Duration(secs) * time.Second
	switch {
	case d < time.Minute:
		return "less than a minute left"
	case d < time.Hour:
		return fmt.Sprintf("about %d min left", int(d.Round(time.Minute)/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("about %s left", strings.TrimSuffix(d.Round(time.Minute).String(), "0s"))
	}
	return fmt.Sprintf("about %d days left", int(d/(24*time.Hour)))
}
