package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"lockstep/crypt"
	"lockstep/storage/db"
)

// A device's trust decides whether it gets plaintext, so it changes only
// by an explicit step: PUT /rest/devices/{id}/trust (lockstep device set,
// the console's confirm page), never by adding a known device again. A
// device that was ever untrusted here (db.Device.WasUntrusted) becomes
// trusted only with "confirm": true.

// SetTrust is the body of PUT /rest/devices/{id}/trust. Untrusted is
// required; Confirm must be true to make a device that was ever untrusted
// trusted.
type SetTrust struct {
	Untrusted *bool `json:"untrusted"`
	Confirm   bool  `json:"confirm,omitempty"`
}

// TrustChanged answers PUT /rest/devices/{id}/trust.
type TrustChanged struct {
	Device DeviceStatus `json:"device"`
	// Changed is false when the device had that trust already.
	Changed bool `json:"changed"`
	// Folders are the folders shared with the device: a trusted device
	// gets their plaintext, an untrusted one must be given their password
	// again (folder share --password-file).
	Folders []string `json:"folders"`
}

// deviceName is how messages name a device: its name and ID.
func deviceName(d db.Device) string {
	if d.Name == "" {
		return d.ID
	}
	return fmt.Sprintf("%s (%s)", d.Name, d.ID)
}

// folderList renders folder IDs for a message.
func folderList(ids []string) string {
	if len(ids) == 0 {
		return "none yet"
	}
	return strings.Join(ids, ", ")
}

// putDeviceTrust makes a known device trusted or untrusted.
func (s *Server) putDeviceTrust(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := crypt.ParseDeviceID(c.Param("id"))
	if err != nil {
		return badRequest(err.Error())
	}
	var req SetTrust
	if err := c.Bind(&req); err != nil || req.Untrusted == nil {
		return badRequest("body must be {\"untrusted\": true|false, \"confirm\": true|false}")
	}
	old, err := s.cfg.DB.Device(ctx, id.String())
	if errors.Is(err, db.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no device %s", id))
	} else if err != nil {
		return err
	}
	folders, err := s.cfg.DB.DeviceFolders(ctx, old.ID)
	if err != nil {
		return err
	}
	err = s.cfg.DB.SetDeviceTrust(ctx, old.ID, *req.Untrusted, req.Confirm)
	if errors.Is(err, db.ErrWasUntrusted) {
		return echo.NewHTTPError(http.StatusConflict, fmt.Sprintf(
			"device %s was untrusted here: once trusted it gets the plaintext of every folder shared with it (%s); confirm that it may ('lockstep device set %s --trusted --yes', or \"confirm\": true)",
			deviceName(old), folderList(folders), old.ID))
	} else if errors.Is(err, db.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no device %s", id))
	} else if err != nil {
		return err
	}
	d, err := s.cfg.DB.Device(ctx, old.ID)
	if err != nil {
		return err
	}
	changed := d.Untrusted != old.Untrusted
	if changed {
		s.cfg.Logger.Warn("device trust changed", "device", d.ID, "untrusted", d.Untrusted, "folders", folders)
		s.cfg.Conns.Reload()
		if err := s.cfg.Engine.Reload(ctx); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, TrustChanged{Device: s.deviceStatusOf(d), Changed: changed, Folders: nonNil(folders)})
}

// trustConflict is the error of adding a known device with a trust other
// than its own.
func trustConflict(d db.Device) error {
	if d.Untrusted {
		return echo.NewHTTPError(http.StatusConflict, fmt.Sprintf(
			"device %s is untrusted, and adding it again does not change that: to make it trusted, which gives it plaintext, run 'lockstep device set %s --trusted'",
			deviceName(d), d.ID))
	}
	return echo.NewHTTPError(http.StatusConflict, fmt.Sprintf(
		"device %s is trusted, and adding it again does not change that: to make it untrusted run 'lockstep device set %s --untrusted'",
		deviceName(d), d.ID))
}

// wasUntrustedConflict is the error of adding as trusted a device that
// was untrusted here before it was removed.
func wasUntrustedConflict(id string) error {
	return echo.NewHTTPError(http.StatusConflict, fmt.Sprintf(
		"device %s was an untrusted receiver here before: add it with --untrusted, then, if it is to get plaintext, run 'lockstep device set %s --trusted --yes'",
		id, id))
}

// The console's trust change: a confirm page that says what the change
// means, then the POST it sends.

func (s *Server) getTrustPage(c echo.Context) error {
	d, err := s.consoleDevice(c)
	if err != nil {
		return err
	}
	folders, err := s.cfg.DB.DeviceFolders(c.Request().Context(), d.ID)
	if err != nil {
		return err
	}
	name := d.Name
	if name == "" {
		name = d.ID
	}
	p := confirmPage{
		page:   s.newPage(c, "Change a device's trust"),
		Action: "/devices/" + d.ID + "/trust", Back: "/devices",
	}
	if d.Untrusted {
		p.Question = fmt.Sprintf("Make the device %s (%s) trusted?", name, d.ID)
		p.Note = fmt.Sprintf("It is an untrusted receiver: so far it got only encrypted data. Once trusted it gets the plaintext of every folder shared with it (%s), and of every folder you share with it later.", folderList(folders))
		p.Button = "Make trusted"
		p.Fields = []formField{{"untrusted", "0"}, {"confirm", "1"}}
	} else {
		p.Question = fmt.Sprintf("Make the device %s (%s) untrusted?", name, d.ID)
		p.Note = fmt.Sprintf("From now on it gets only encrypted data; what it got already stays with it. Share its folders (%s) again with a password to back them up there. Making it trusted again will ask for a confirmation.", folderList(folders))
		p.Button = "Make untrusted"
		p.Fields = []formField{{"untrusted", "1"}}
	}
	return s.render(c, http.StatusOK, "confirm.html", p)
}

func (s *Server) postTrustForm(c echo.Context) error {
	d, err := s.consoleDevice(c)
	if err != nil {
		return err
	}
	untrusted := c.FormValue("untrusted") == "1"
	req := SetTrust{Untrusted: &untrusted, Confirm: c.FormValue("confirm") == "1"}
	name := shownName(d.Name, d.ID)
	msg := name + " is now trusted: it gets the plaintext of the folders shared with it."
	if untrusted {
		msg = name + " is now untrusted: it gets only encrypted data."
	}
	return s.formResult(c, "/devices", msg, s.callREST(c, s.putDeviceTrust, req, "id", d.ID))
}
