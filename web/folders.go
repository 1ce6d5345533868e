package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/engine"
	"lockstep/sync/receiver"
	"lockstep/sync/versions"
)

// Engine is what the API needs from the sync engine.
type Engine interface {
	Reload(ctx context.Context) error
	Scan(folderID string) error
	AllowDeletes(folderID string) error
	FolderStatus(folderID string) (engine.FolderStatus, bool)
	Versioning(ctx context.Context, folderID string) (versions.Policy, error)
	SetVersioning(ctx context.Context, folderID string, p versions.Policy) error
	Versions(ctx context.Context, folderID, path string) ([]versions.Version, error)
	CleanVersions(ctx context.Context, folderID string) ([]versions.Version, error)
	RestoreVersion(ctx context.Context, folderID, id, toDir string) (string, error)
}

// Backup is the sending side of the node's encrypted shares
// (sync/backup).
type Backup interface {
	ShareEncrypted(ctx context.Context, folderID string, dev crypt.DeviceID, password, newPassword []byte) error
	RotateKey(ctx context.Context, folderID string, password, newPassword []byte) (int, error)
	ReceiverVersions(ctx context.Context, folderID, path string) ([]backup.ReceiverVersion, error)
	RestoreFromReceiver(ctx context.Context, folderID string, vs []backup.ReceiverVersion, toDir string) ([]string, error)
	Status(folderID string) backup.Status
}

// noBackup is the Backup of a node without encrypted shares.
type noBackup struct{}

var errNoBackup = errors.New("this node has no encrypted shares")

func (noBackup) ShareEncrypted(context.Context, string, crypt.DeviceID, []byte, []byte) error {
	return errNoBackup
}
func (noBackup) RotateKey(context.Context, string, []byte, []byte) (int, error) {
	return 0, errNoBackup
}
func (noBackup) ReceiverVersions(context.Context, string, string) ([]backup.ReceiverVersion, error) {
	return nil, nil
}
func (noBackup) RestoreFromReceiver(context.Context, string, []backup.ReceiverVersion, string) ([]string, error) {
	return nil, errNoBackup
}
func (noBackup) Status(string) backup.Status { return backup.Status{} }

// Receiver reports and manages a receiver's encrypted folders.
type Receiver interface {
	Status(ctx context.Context, folderID string) (receiver.Status, error)
	Retention(ctx context.Context, folderID string) (receiver.Policy, error)
	SetRetention(ctx context.Context, folderID string, p receiver.Policy) error
	Prune(ctx context.Context, folderID string, o receiver.PruneOptions) (receiver.PruneResult, error)
}

func (s *Server) folderRoutes(r *echo.Group) {
	s.versionRoutes(r)
	r.GET("/folders", s.getFolders)
	r.POST("/folders", s.postFolder)
	r.DELETE("/folders/:id", s.deleteFolder)
	r.POST("/folders/:id/share", s.postShare)
	r.DELETE("/folders/:id/share/:device", s.deleteShare)
	r.POST("/folders/:id/scan", s.postScan)
	r.POST("/folders/:id/allow-deletes", s.postAllowDeletes)
}

var folderIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (s *Server) folderStatuses(ctx context.Context) ([]FolderStatus, error) {
	folders, err := s.cfg.DB.Folders(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, ci := range s.cfg.Conns.Connections() {
		live[ci.ID.String()] = true
	}
	lastSeen := map[string]*time.Time{}
	if devs, err := s.cfg.DB.Devices(ctx); err == nil {
		for _, d := range devs {
			if !d.LastSeen.IsZero() {
				lastSeen[d.ID] = &d.LastSeen
			}
		}
	}
	out := make([]FolderStatus, 0, len(folders))
	transfers := map[string]bool{}
	defer s.rates.forget(transfers)
	for _, f := range folders {
		fs := FolderStatus{ID: f.ID, Label: f.Label, Path: f.Path, Type: string(f.Type), State: "idle", Peers: []PeerStatus{}}
		if st, ok := s.cfg.Engine.FolderStatus(f.ID); ok {
			fs.State, fs.Error = st.State, st.Error
			fs.LocalFiles, fs.LocalBytes = st.LocalFiles, st.LocalBytes
			fs.GlobalFiles, fs.GlobalBytes = st.GlobalFiles, st.GlobalBytes
			fs.NeedFiles, fs.NeedBytes = st.NeedFiles, st.NeedBytes
			fs.LocalDirectories, fs.GlobalDirectories, fs.NeedDirectories = st.LocalDirectories, st.GlobalDirectories, st.NeedDirectories
			fs.PulledBytes, fs.ReusedBytes, fs.PulledBlocks = st.PulledBytes, st.ReusedBytes, st.PulledBlocks
			fs.HashedBytes, fs.ResumedBytes = st.HashedBytes, st.ResumedBytes
			bs := s.cfg.Backup.Status(f.ID)
			fs.TamperedRecords, fs.TamperedChunks = bs.TamperedRecords, bs.TamperedChunks
			if bs.Restoring {
				fs.RestoreFiles, fs.RestoreFilesTotal = bs.RestoreFiles, bs.RestoreFilesTotal
				fs.RestoreBytes, fs.RestoreBytesTotal = bs.RestoreBytes, bs.RestoreBytesTotal
				key := "restore " + f.ID
				rate, left := s.rates.observe(key, fs.RestoreBytes, fs.RestoreBytesTotal)
				fs.RestoreBytesPerSecond, fs.RestoreSecondsLeft = rate, int64(left/time.Second)
				transfers[key] = true
			}
			if fs.State == "syncing" {
				fs.PullBytesTotal, fs.PullBytesDone = st.PullTotal, st.PullDone
				key := "pull " + f.ID
				rate, left := s.rates.observe(key, fs.PullBytesDone, fs.PullBytesTotal)
				fs.PullBytesPerSecond, fs.PullSecondsLeft = rate, int64(left/time.Second)
				transfers[key] = true
			}
			for _, p := range st.Peers {
				id := p.Device.String()
				fs.Peers = append(fs.Peers, PeerStatus{Device: id, Connected: p.Connected, Completion: p.Completion, Untrusted: p.Untrusted, Error: bs.Receivers[p.Device].Error, LastContact: lastSeen[id]})
			}
		} else {
			shared, err := s.cfg.DB.FolderDevices(ctx, f.ID)
			if err != nil && !errors.Is(err, db.ErrNotFound) {
				return nil, err
			}
			var rs receiver.Status
			if f.Type == db.Encrypted && s.cfg.Receiver != nil {
				if rs, err = s.cfg.Receiver.Status(ctx, f.ID); err != nil {
					fs.State, fs.Error = "error", err.Error()
				} else {
					fs.Receiver = &ReceiverStatus{
						Records: rs.Records, Files: rs.Files, Chunks: rs.Chunks,
						StoredBytes: rs.StoredBytes, ReferencedBytes: rs.ReferencedBytes,
						DedupRatio: rs.DedupRatio, LogSequence: rs.LogSequence,
					}
				}
			}
			stored := map[string]*time.Time{}
			for _, o := range rs.Origins {
				if !o.LastStored.IsZero() {
					stored[o.Device.String()] = &o.LastStored
				}
			}
			for _, d := range shared {
				fs.Peers = append(fs.Peers, PeerStatus{Device: d, Connected: live[d], LastContact: lastSeen[d], LastStored: stored[d]})
			}
			if f.Type != db.Encrypted && !f.Paused {
				// Added a moment ago, the engine not running it yet: it
				// has not been scanned, and `folder add --wait` must not
				// take it for idle.
				fs.State = engine.StateStarting
			}
			if f.Error != "" {
				fs.State, fs.Error = "error", f.Error
			}
			if f.Paused {
				fs.State = "paused"
			}
		}
		if err := s.folderCheck(ctx, &fs); err != nil {
			return nil, err
		}
		if fs.Check != nil && fs.Check.Running != nil {
			transfers[checkTransfer(f.ID)] = true
		}
		out = append(out, fs)
	}
	return out, nil
}

func (s *Server) getFolders(c echo.Context) error {
	out, err := s.folderStatuses(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) postFolder(c echo.Context) error {
	var req AddFolder
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	f, err := s.addFolder(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, FolderStatus{ID: f.ID, Label: f.Label, Path: f.Path, Type: string(f.Type), State: "idle", Peers: []PeerStatus{}})
}

func (s *Server) addFolder(ctx context.Context, req AddFolder) (db.Folder, error) {
	if !folderIDPattern.MatchString(req.ID) {
		return db.Folder{}, badRequest("folder ID must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if req.Path == "" {
		return db.Folder{}, badRequest("a folder needs a path")
	}
	if !filepath.IsAbs(req.Path) {
		return db.Folder{}, badRequest("the folder path must be absolute")
	}
	typ := db.FolderType(req.Type)
	if req.Type == "" {
		typ = db.SendReceive
	}
	if !typ.Valid() {
		return db.Folder{}, badRequest(fmt.Sprintf("unknown folder type %q: want sendreceive, sendonly, receiveonly or encrypted", req.Type))
	}
	if _, err := s.cfg.DB.Folder(ctx, req.ID); err == nil {
		return db.Folder{}, echo.NewHTTPError(http.StatusConflict, fmt.Sprintf("folder %q exists already", req.ID))
	}
	folders, err := s.cfg.DB.Folders(ctx)
	if err != nil {
		return db.Folder{}, err
	}
	clean := filepath.Clean(req.Path)
	if fi, err := os.Stat(clean); err == nil && !fi.IsDir() {
		return db.Folder{}, badRequest(fmt.Sprintf("%s is not a directory", clean))
	}
	for _, f := range folders {
		if overlaps(f.Path, clean) {
			return db.Folder{}, badRequest(fmt.Sprintf("path overlaps folder %q at %s", f.ID, f.Path))
		}
	}
	f := db.Folder{ID: req.ID, Label: req.Label, Path: clean, Type: typ}
	if err := s.cfg.DB.PutFolder(ctx, f); err != nil {
		return db.Folder{}, err
	}
	return f, s.cfg.Engine.Reload(ctx)
}

// overlaps reports whether one path is inside the other (or equal).
func overlaps(a, b string) bool {
	rel, err := filepath.Rel(a, b)
	if err == nil && (rel == "." || !filepath.IsAbs(rel) && rel != ".." && !hasDotDotPrefix(rel)) {
		return true
	}
	rel, err = filepath.Rel(b, a)
	return err == nil && rel != ".." && !hasDotDotPrefix(rel)
}

func hasDotDotPrefix(rel string) bool {
	return len(rel) >= 3 && rel[:3] == ".."+string(filepath.Separator)
}

func (s *Server) deleteFolder(c echo.Context) error {
	ctx := c.Request().Context()
	if err := s.cfg.DB.RemoveFolder(ctx, c.Param("id")); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no folder %q", c.Param("id")))
		}
		return err
	}
	if err := s.cfg.Engine.Reload(ctx); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) postShare(c echo.Context) error {
	ctx := c.Request().Context()
	var req ShareFolder
	if err := c.Bind(&req); err != nil {
		return badRequest("invalid JSON body")
	}
	f, err := s.cfg.DB.Folder(ctx, c.Param("id"))
	if err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no folder %q", c.Param("id")))
		}
		return err
	}
	id, err := crypt.ParseDeviceID(req.Device)
	if err != nil {
		return badRequest(err.Error())
	}
	d, err := s.cfg.DB.Device(ctx, id.String())
	if err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return badRequest(fmt.Sprintf("device %s is not known; add it first", id))
		}
		return err
	}
	switch {
	case d.Untrusted && f.Type == db.Encrypted:
		return badRequest("an encrypted folder is shared with the trusted devices whose backup it holds, not with untrusted ones")
	case d.Untrusted && req.Password == "":
		return badRequest("sharing with an untrusted device needs a password (--password-file)")
	case !d.Untrusted && (req.Password != "" || req.NewPassword != ""):
		return badRequest("a password is only for untrusted devices; this one is trusted")
	case req.RotateKey && req.NewPassword == "":
		return badRequest("rotating the key needs the new password too (--new-password-file)")
	case d.Untrusted:
		var newPw []byte
		if req.NewPassword != "" {
			newPw = []byte(req.NewPassword)
		}
		var err error
		if req.RotateKey {
			_, err = s.cfg.Backup.RotateKey(ctx, f.ID, []byte(req.Password), newPw)
		} else {
			err = s.cfg.Backup.ShareEncrypted(ctx, f.ID, id, []byte(req.Password), newPw)
		}
		switch {
		case errors.Is(err, crypt.ErrWrongPassword):
			return echo.NewHTTPError(http.StatusForbidden, err.Error()).SetInternal(err)
		case errors.Is(err, backup.ErrKeyMismatch):
			return echo.NewHTTPError(http.StatusConflict, err.Error())
		case errors.Is(err, backup.ErrNotConnected):
			return echo.NewHTTPError(http.StatusServiceUnavailable, err.Error())
		case err != nil:
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
	if err := s.cfg.DB.ShareFolder(ctx, f.ID, d.ID); err != nil {
		return err
	}
	if err := s.cfg.DB.RemovePendingFolder(ctx, d.ID, f.ID); err != nil && !errors.Is(err, db.ErrNotFound) {
		return err
	}
	if err := s.cfg.Engine.Reload(ctx); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) deleteShare(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := crypt.ParseDeviceID(c.Param("device"))
	if err != nil {
		return badRequest(err.Error())
	}
	if err := s.cfg.DB.UnshareFolder(ctx, c.Param("id"), id.String()); err != nil {
		return err
	}
	if err := s.cfg.Engine.Reload(ctx); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) postScan(c echo.Context) error {
	if err := s.cfg.Engine.Scan(c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) postAllowDeletes(c echo.Context) error {
	if err := s.cfg.Engine.AllowDeletes(c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// acceptFolder accepts a folder offer: the folder is created at path (or
// under the default root) and shared with every device that offered it.
func (s *Server) acceptFolder(c echo.Context, folderID, path string) error {
	ctx := c.Request().Context()
	offers, err := s.cfg.DB.PendingFolders(ctx)
	if err != nil {
		return err
	}
	var devices []string
	label, encrypted := "", false
	for _, o := range offers {
		if o.FolderID == folderID {
			devices = append(devices, o.DeviceID)
			label = o.Label
			encrypted = encrypted || o.Encrypted
		}
	}
	if len(devices) == 0 {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("nothing pending is called %q", folderID))
	}
	if path == "" {
		if s.cfg.FolderRoot == "" {
			return badRequest("give the folder a path (--path)")
		}
		path = filepath.Join(s.cfg.FolderRoot, folderID)
	}
	if _, err := s.cfg.DB.Folder(ctx, folderID); errors.Is(err, db.ErrNotFound) {
		typ := ""
		if encrypted {
			typ = string(db.Encrypted)
		}
		if _, err := s.addFolder(ctx, AddFolder{ID: folderID, Path: path, Label: label, Type: typ}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	for _, d := range devices {
		if err := s.cfg.DB.ShareFolder(ctx, folderID, d); err != nil {
			return err
		}
		if err := s.cfg.DB.RemovePendingFolder(ctx, d, folderID); err != nil && !errors.Is(err, db.ErrNotFound) {
			return err
		}
	}
	if err := s.cfg.Engine.Reload(ctx); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
