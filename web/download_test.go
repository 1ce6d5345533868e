package web

import (
	"context"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/receiver"
	"lockstep/sync/versions"
)

// downloadEngine writes real files when asked to restore into a
// directory: a version's content is "content of <ID>".
type downloadEngine struct {
	versionsEngine
}

func (e *downloadEngine) RestoreVersion(_ context.Context, folderID, id, toDir string) (string, error) {
	for _, v := range e.local {
		if v.ID == id {
			return writeVersion(toDir, v.Path, id)
		}
	}
	return "", os.ErrNotExist
}

func (e *downloadEngine) RestoreFromReceiver(_ context.Context, folderID string, vs []backup.ReceiverVersion, toDir string) ([]string, error) {
	var out []string
	for _, v := range vs {
		p, err := writeVersion(toDir, v.Path, v.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func writeVersion(dir, name, id string) (string, error) {
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte("content of "+id), 0o644)
}

func TestDownloadVersion(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var recv [32]byte
	recv[0] = 0xab
	recvID := strings.Repeat("ab", 32) + "-1"
	eng := &downloadEngine{versionsEngine{
		local: []versions.Version{
			{Path: "sub/" + evilName, ID: "v-1", Time: base, Size: 14},
			{Path: "other.txt", ID: "o-1", Time: base, Size: 14},
		},
		remote: []backup.ReceiverVersion{
			{Path: "sub/" + evilName, ID: recvID, Stored: base, Size: 10, Receiver: recv},
			{Path: "sub/" + evilName, ID: strings.Repeat("ab", 32) + "-2", Stored: base, Deleted: true, Receiver: recv},
		},
	}}
	ts, database := newTestServerEngine(t, eng)
	ctx := context.Background()
	for _, f := range []db.Folder{{ID: "docs", Path: "/data/docs", Type: db.SendReceive}, {ID: "vault", Path: "/data/vault", Type: db.Encrypted}} {
		if err := database.PutFolder(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	c := setUp(t, ts.URL)
	get := func(folder, path, version string) (*http.Response, string) {
		t.Helper()
		u := ts.URL + "/folders/" + folder + "/versions/download?" + url.Values{"path": {path}, "version": {version}}.Encode()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, version := range []string{"v-1", recvID} {
		resp, body := get("docs", "sub/"+evilName, version)
		if resp.StatusCode != http.StatusOK || body != "content of "+version {
			t.Fatalf("downloading %s: %s %q", version, resp.Status, body)
		}
		_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
		if err != nil {
			t.Fatalf("Content-Disposition %q: %v", resp.Header.Get("Content-Disposition"), err)
		}
		// The name carries the version's time, as the archive's do.
		if params["filename"] != "script>~20260102-030405.txt" {
			t.Errorf("download named %q", params["filename"])
		}
		if resp.Header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
		}
	}
	for _, tc := range []struct{ folder, path, version string }{
		{"docs", "other.txt", "v-1"},                                 // another file's version
		{"docs", "sub/" + evilName, strings.Repeat("ab", 32) + "-2"}, // a deletion
		{"docs", "sub/" + evilName, strings.Repeat("cd", 32) + "-1"}, // held by nobody
		{"docs", "sub/" + evilName, "nope"},
	} {
		if resp, _ := get(tc.folder, tc.path, tc.version); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: %s, want 404", tc.path, tc.version, resp.Status)
		}
	}
	if resp, _ := get("vault", "x", "v-1"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a receiver's encrypted folder: %s, want 400", resp.Status)
	}
	if resp, _ := get("docs", "", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no path: %s, want 400", resp.Status)
	}
	// The versions page links the download of every live version.
	_, page := getBody(t, c, ts.URL+"/folders/docs/versions?"+url.Values{"path": {"sub/" + evilName}}.Encode())
	if n := strings.Count(page, `class="download"`); n != 2 {
		t.Errorf("%d download links, want 2", n)
	}
	// The API key works too.
	req, _ := http.NewRequest("GET", ts.URL+"/rest/folders/docs/versions/download?path=other.txt&version=o-1", nil)
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "content of o-1" {
		t.Errorf("REST download: %s %q", resp.Status, b)
	}
}

func TestVersionedName(t *testing.T) {
	at := time.Date(2026, 12, 4, 3, 30, 1, 0, time.FixedZone("CET", 3600))
	for in, want := range map[string]string{
		"docs/report.txt": "report~20261204-023001.txt",
		"archive.tar.gz":  "archive.tar~20261204-023001.gz",
		"Makefile":        "Makefile~20261204-023001",
		".bashrc":         ".bashrc~20261204-023001",
	} {
		if got := versionedName(in, at); got != want {
			t.Errorf("versionedName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDownloadName(t *testing.T) {
	long := strings.Repeat("é", maxFileName) // 2 bytes each
	for in, want := range map[string]string{
		"a/b/report.txt":         "report.txt",
		"..":                     "download",
		"":                       "download",
		"a\nb\"c\\d.txt":         "d.txt",
		"x\r\nSet-Cookie: a=b":   "x__Set-Cookie: a=b",
		"dir/\u202egnp.exe":      "_gnp.exe",
		"résumé.pdf":             "résumé.pdf",
		long:                     strings.Repeat("é", maxFileName/2),
		strings.Repeat("a", 199): strings.Repeat("a", 199),
		strings.Repeat("a", 200): strings.Repeat("a", 200),
		strings.Repeat("a", 201): strings.Repeat("a", 200),
		"bad\xffutf8":            "bad_utf8",
	} {
		if got := downloadName(in); got != want {
			t.Errorf("downloadName(%q) = %q, want %q", in, got, want)
		}
	}
	h := contentDisposition("résumé.pdf")
	_, params, err := mime.ParseMediaType(h)
	if err != nil || params["filename"] != "résumé.pdf" {
		t.Errorf("Content-Disposition %q parses to %v, %v", h, params, err)
	}
}

// FuzzContentDisposition: whatever the file name, the header is one line
// of printable ASCII that parses as an attachment whose file name is
// non-empty, has no path separator or control character, and fits.
func FuzzContentDisposition(f *testing.F) {
	for _, s := range []string{"a.txt", "dir/b.txt", evilName, "x\r\ny", "résumé.pdf", `"; filename="evil`, "..", "\u202e", "%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		h := contentDisposition(p)
		for _, r := range h {
			if r < 0x20 || r > 0x7e {
				t.Fatalf("header %q holds %q", h, r)
			}
		}
		typ, params, err := mime.ParseMediaType(h)
		if err != nil || typ != "attachment" {
			t.Fatalf("header %q: %q, %v", h, typ, err)
		}
		name := params["filename"]
		if name == "" || len(name) > maxFileName || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
			t.Fatalf("file name %q from %q", name, p)
		}
		if !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
			t.Fatalf("file name %q from %q", name, p)
		}
	})
}

// TestReceiverFolderPage: an encrypted folder's page shows the receiver's
// figures, devices and retention, and offers nothing that needs the
// password.
func TestReceiverFolderPage(t *testing.T) {
	base, _, rcv, c := newSettingsServer(t)
	rcv.policy = receiver.Policy{KeepLast: 4, KeepDaily: 7}
	code, body := getBody(t, c, base+"/folders/vault")
	if code != http.StatusOK {
		t.Fatalf("vault page: %d\n%s", code, body)
	}
	for _, want := range []string{`id="receiver-figures"`, `id="stored-bytes">3.0 KiB`, `id="chunks">12<`, `id="dedup">1.50<`, "Keep last 4, hourly 0, daily 7"} {
		if !strings.Contains(body, want) {
			t.Errorf("vault page lacks %q:\n%s", want, body)
		}
	}
	for _, bad := range []string{"versions-link", "/versions", "/restore", "class=\"restore\"", "download"} {
		if strings.Contains(body, bad) {
			t.Errorf("vault page offers %q:\n%s", bad, body)
		}
	}
	// A link to its versions page says why there are none, as a page.
	if code, page := getBody(t, c, base+"/folders/vault/versions"); code != http.StatusOK || !strings.Contains(page, `id="versions-receiver"`) || strings.Contains(page, `id="version-search"`) {
		t.Errorf("versions page of an encrypted folder: %d\n%s", code, page)
	}
	if _, page := getBody(t, c, base+"/folders/vault/settings"); strings.Contains(page, "/versions") {
		t.Errorf("the receiver's settings page links versions:\n%s", page)
	}
	_, docs := getBody(t, c, base+"/folders/docs")
	if !strings.Contains(docs, "versions-link") || strings.Contains(docs, "receiver-figures") {
		t.Errorf("a trusted folder's page:\n%s", docs)
	}
}
