package web

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/crypt"
	"lockstep/storage/blob/metered"
	"lockstep/storage/db"
	"lockstep/sync/connections"
)

func (s *Server) restRoutes(r *echo.Group) {
	r.GET("/status", s.getStatus)
	r.GET("/devices", s.getDevices)
	r.POST("/devices", s.postDevice)
	r.DELETE("/devices/:id", s.deleteDevice)
	r.PUT("/devices/:id/trust", s.putDeviceTrust)
	r.GET("/pending", s.getPending)
	r.POST("/pending/accept", s.postAccept)
	r.GET("/discovery", s.getDiscovery)
	r.GET("/events", s.getEvents)
	r.PUT("/console/password", s.putConsolePassword)
	s.folderRoutes(r)
	s.manageRESTRoutes(r)
	s.controlRoutes(r)
	s.checkRoutes(r)
}

func (s *Server) getStatus(c echo.Context) error {
	ctx := c.Request().Context()
	devs, err := s.deviceStatus(c)
	if err != nil {
		return err
	}
	folders, err := s.folderStatuses(ctx)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, Status{DeviceID: s.cfg.ID.String(), Store: s.cfg.Store, StoreUsage: s.storeUsage(), Memory: s.memory(), Devices: devs, Folders: folders, Discovery: s.discoveryStatus(devs)})
}

// memory is the process's memory, or nil when unknown.
func (s *Server) memory() *MemoryStatus {
	if s.cfg.Memory == nil {
		return nil
	}
	return s.cfg.Memory()
}

// storeUsage is the blob store's usage, or nil when it is not metered.
func (s *Server) storeUsage() *metered.Snapshot {
	if s.cfg.StoreUsage == nil {
		return nil
	}
	u, ok := s.cfg.StoreUsage()
	if !ok {
		return nil
	}
	return &u
}

func (s *Server) deviceStatus(c echo.Context) ([]DeviceStatus, error) {
	devs, err := s.cfg.DB.Devices(c.Request().Context())
	if err != nil {
		return nil, err
	}
	live := map[string]connections.Info{}
	for _, ci := range s.cfg.Conns.Connections() {
		live[ci.ID.String()] = ci
	}
	out := make([]DeviceStatus, 0, len(devs))
	for _, d := range devs {
		out = append(out, deviceStatus(d, live))
	}
	return out, nil
}

// deviceStatusOf is the status of one known device.
func (s *Server) deviceStatusOf(d db.Device) DeviceStatus {
	live := map[string]connections.Info{}
	for _, ci := range s.cfg.Conns.Connections() {
		live[ci.ID.String()] = ci
	}
	return deviceStatus(d, live)
}

// deviceStatus is d's status, connected when live (by device ID) has it.
func deviceStatus(d db.Device, live map[string]connections.Info) DeviceStatus {
	ds := DeviceStatus{ID: d.ID, Name: d.Name, Addresses: nonNil(d.Addresses), Untrusted: d.Untrusted, WasUntrusted: d.WasUntrusted, Paused: d.Paused}
	if ci, ok := live[d.ID]; ok {
		ds.Connected, ds.Address, ds.Connection = true, ci.Addr, ci.Type
	}
	if !d.LastSeen.IsZero() {
		t := d.LastSeen
		ds.LastSeen = &t
	}
	if !d.TrustChangedAt.IsZero() {
		t := d.TrustChangedAt
		ds.TrustChangedAt = &t
	}
	return ds
}

func (s *Server) getDevices(c echo.Context) error {
	devs, err := s.deviceStatus(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, devs)
}

func (s *Server) postDevice(c echo.Context) error {
	ctx := c.Request().Context()
	var req AddDevice
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	id, err := crypt.ParseDeviceID(req.ID)
	if err != nil {
		return badRequest(err.Error())
	}
	if id == s.cfg.ID {
		return badRequest("that is this device's own ID")
	}
	for _, a := range req.Addresses {
		if a == "dynamic" {
			continue
		}
		if _, err := connections.ParseAddress(a); err != nil {
			return badRequest(err.Error())
		}
	}
	if req.Untrusted && req.Trusted {
		return badRequest("a device is either trusted or untrusted, not both")
	}
	d := db.Device{ID: id.String(), Name: req.Name, Addresses: req.Addresses, Untrusted: req.Untrusted}
	if old, err := s.cfg.DB.Device(ctx, d.ID); err == nil {
		// Re-adding updates the device's name and addresses; keep what
		// the request leaves out, and its trust, which changes only by
		// PUT /rest/devices/{id}/trust.
		if req.Untrusted && !old.Untrusted || req.Trusted && old.Untrusted {
			return trustConflict(old)
		}
		d.Untrusted = old.Untrusted
		if d.Name == "" {
			d.Name = old.Name
		}
		if len(d.Addresses) == 0 {
			d.Addresses = old.Addresses
		}
	} else if !errors.Is(err, db.ErrNotFound) {
		return err
	}
	if err := s.cfg.DB.PutDevice(ctx, d); err != nil {
		if errors.Is(err, db.ErrWasUntrusted) {
			return wasUntrustedConflict(d.ID)
		}
		if errors.Is(err, db.ErrTrustChange) {
			// Its trust changed since it was read: say what it is now.
			if cur, err := s.cfg.DB.Device(ctx, d.ID); err == nil {
				return trustConflict(cur)
			}
		}
		return err
	}
	// A device the user added is no longer pending.
	if err := s.cfg.DB.RemovePendingDevice(ctx, d.ID); err != nil && !errors.Is(err, db.ErrNotFound) {
		return err
	}
	s.cfg.Conns.Reload()
	added, err := s.cfg.DB.Device(ctx, d.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.deviceStatusOf(added))
}

func (s *Server) deleteDevice(c echo.Context) error {
	id, err := crypt.ParseDeviceID(c.Param("id"))
	if err != nil {
		return badRequest(err.Error())
	}
	if err := s.cfg.DB.RemoveDevice(c.Request().Context(), id.String()); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no device %s", id))
		}
		return err
	}
	s.cfg.Conns.Reload()
	// The database forgets its shares with it; the running folders learn
	// it here, or they would list it as a peer until the next change.
	if err := s.cfg.Engine.Reload(c.Request().Context()); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getPending(c echo.Context) error {
	ctx := c.Request().Context()
	devs, err := s.cfg.DB.PendingDevices(ctx)
	if err != nil {
		return err
	}
	folders, err := s.cfg.DB.PendingFolders(ctx)
	if err != nil {
		return err
	}
	p := Pending{Devices: []PendingDevice{}, Folders: []PendingFolder{}}
	for _, d := range devs {
		p.Devices = append(p.Devices, PendingDevice{ID: d.ID, Name: d.Name, Address: d.Address, FirstSeen: d.FirstSeen, LastSeen: d.LastSeen})
	}
	for _, f := range folders {
		p.Folders = append(p.Folders, PendingFolder{Device: f.DeviceID, Folder: f.FolderID, Label: f.Label, FirstSeen: f.FirstSeen, Encrypted: f.Encrypted})
	}
	return c.JSON(http.StatusOK, p)
}

// postAccept accepts a pending device (it becomes a trusted device whose
// address is found when it connects again) or a pending folder offer.
func (s *Server) postAccept(c echo.Context) error {
	ctx := c.Request().Context()
	var req Accept
	if err := c.Bind(&req); err != nil || req.ID == "" {
		return badRequest("body must be {\"id\": DEVICE-or-FOLDER}")
	}
	if id, err := crypt.ParseDeviceID(req.ID); err == nil {
		pend, err := s.findPendingDevice(c, id.String())
		if err != nil {
			return err
		}
		d := db.Device{ID: pend.ID, Name: pend.Name, Addresses: []string{"dynamic"}, AddedAt: time.Now()}
		if err := s.cfg.DB.PutDevice(ctx, d); err != nil {
			if errors.Is(err, db.ErrWasUntrusted) {
				return wasUntrustedConflict(d.ID)
			}
			return err
		}
		if err := s.cfg.DB.RemovePendingDevice(ctx, d.ID); err != nil && !errors.Is(err, db.ErrNotFound) {
			return err
		}
		s.cfg.Conns.Reload()
		return c.JSON(http.StatusOK, DeviceStatus{ID: d.ID, Name: d.Name, Addresses: d.Addresses})
	}
	return s.acceptFolder(c, req.ID, req.Path)
}

func (s *Server) findPendingDevice(c echo.Context, id string) (db.PendingDevice, error) {
	devs, err := s.cfg.DB.PendingDevices(c.Request().Context())
	if err != nil {
		return db.PendingDevice{}, err
	}
	for _, d := range devs {
		if d.ID == id {
			return d, nil
		}
	}
	return db.PendingDevice{}, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("device %s is not pending", id))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
