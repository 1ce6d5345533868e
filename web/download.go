package web

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"lockstep/storage/db"
	"lockstep/sync/backup"
)

// Downloading a kept version: the version is restored into a temporary
// directory (local versions are copied, receiver versions fetched and
// verified like any restore), streamed as an attachment, and removed.

// maxFileName bounds the download's file name, in bytes.
const maxFileName = 200

func (s *Server) downloadRoutes(g *echo.Group) {
	g.GET("/folders/:id/versions/download", s.getDownload)
}

// getDownload streams version "version" of file "path" of folder :id as an
// attachment named after the file.
func (s *Server) getDownload(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	f, err := s.cfg.DB.Folder(ctx, id)
	if err != nil {
		return folderError(id, err)
	}
	if f.Type == db.Encrypted {
		return badRequest(fmt.Sprintf("this node holds only ciphertext of %q; download versions on a device that has its password", id))
	}
	name, version := c.QueryParam("path"), c.QueryParam("version")
	if name == "" || version == "" {
		return badRequest("name the file (path) and its version")
	}
	tmp, err := os.MkdirTemp(s.cfg.Home, ".download-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	where, at, err := s.restoreForDownload(c, f.ID, name, version, tmp)
	if err != nil {
		return err
	}
	in, err := os.Open(where)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return badRequest("only a file's versions can be downloaded")
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/octet-stream")
	h.Set(echo.HeaderContentDisposition, contentDisposition(versionedName(name, at)))
	h.Set(echo.HeaderContentLength, fmt.Sprint(st.Size()))
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	_, err = io.Copy(c.Response(), in)
	return err
}

// restoreForDownload writes the version into dir and returns the file's
// path there and the version's time. The version must be one of name's:
// an ID of another file is not found.
func (s *Server) restoreForDownload(c echo.Context, folderID, name, version, dir string) (string, time.Time, error) {
	ctx := c.Request().Context()
	if backup.IsReceiverVersion(version) {
		rvs, err := s.cfg.Backup.ReceiverVersions(ctx, folderID, name)
		if err != nil {
			return "", time.Time{}, folderError(folderID, err)
		}
		for _, v := range rvs {
			if v.ID != version || v.Path != name {
				continue
			}
			if v.Deleted {
				return "", time.Time{}, echo.NewHTTPError(http.StatusNotFound, "that version is a deletion: it has no content")
			}
			done, err := s.cfg.Backup.RestoreFromReceiver(ctx, folderID, []backup.ReceiverVersion{v}, dir)
			if err != nil {
				return "", time.Time{}, folderError(folderID, err)
			}
			if len(done) != 1 {
				return "", time.Time{}, fmt.Errorf("restoring %s for a download wrote %d files", name, len(done))
			}
			return done[0], v.Stored, nil
		}
		return "", time.Time{}, echo.NewHTTPError(http.StatusNotFound, "no connected receiver holds that version")
	}
	vs, err := s.cfg.Engine.Versions(ctx, folderID, name)
	if err != nil {
		return "", time.Time{}, folderError(folderID, err)
	}
	for _, v := range vs {
		if v.ID == version && v.Path == name {
			where, err := s.cfg.Engine.RestoreVersion(ctx, folderID, v.ID, dir)
			if err != nil {
				return "", time.Time{}, folderError(folderID, err)
			}
			return where, v.Time, nil
		}
	}
	return "", time.Time{}, echo.NewHTTPError(http.StatusNotFound, "no kept version of that file has that ID")
}

// versionedName is folder path p's name with the version's time before
// its extension, as the version archive names them:
// report~20261204-033001.txt. Two versions saved from one file do not
// overwrite each other in a downloads directory.
func versionedName(p string, at time.Time) string {
	if at.IsZero() {
		return p
	}
	stamp := "~" + at.UTC().Format("20060102-150405")
	base := path.Base(strings.ReplaceAll(p, "\\", "/"))
	ext := path.Ext(base)
	if ext == base { // ".bashrc": a name, not an extension
		ext = ""
	}
	return strings.TrimSuffix(base, ext) + stamp + ext
}

// downloadName makes a safe attachment file name of a folder path (which
// is untrusted): its base name, without control characters, path
// separators or characters that would end or escape a quoted header
// value, at most maxFileName bytes, never empty or a dot name.
func downloadName(p string) string {
	base := path.Base(strings.ReplaceAll(p, "\\", "/"))
	var b strings.Builder
	for _, r := range base {
		switch {
		case r == utf8.RuneError, unicode.IsControl(r), r == '/', r == '\\', r == '"',
			unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
			r = '_'
		}
		if b.Len()+utf8.RuneLen(r) > maxFileName {
			break
		}
		b.WriteRune(r)
	}
	name := strings.TrimSpace(b.String())
	if strings.Trim(name, ".") == "" {
		return "download"
	}
	return name
}

// asciiName is name with every byte outside printable ASCII, and the
// header's special characters, replaced by '_': the filename for clients
// that ignore filename*.
func asciiName(name string) string {
	out := make([]byte, 0, len(name))
	for _, r := range name {
		if r < 0x20 || r > 0x7e || strings.ContainsRune(`"\;%`, r) {
			out = append(out, '_')
			continue
		}
		out = append(out, byte(r))
	}
	return string(out)
}

// contentDisposition is the Content-Disposition header that downloads a
// file named after folder path p: an ASCII filename and, for the rest of
// Unicode, an RFC 5987 filename*.
func contentDisposition(p string) string {
	name := downloadName(p)
	v := mime.FormatMediaType("attachment", map[string]string{"filename": asciiName(name)})
	if ascii := asciiName(name); ascii != name {
		v += "; filename*=UTF-8''" + encodeExtValue(name)
	}
	return v
}

// encodeExtValue percent-encodes s as an RFC 5987 value: every byte but
// an attr-char is %XX.
func encodeExtValue(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
