package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/engine"
	"lockstep/sync/versions"
)

// versionsEngine keeps local versions and receiver versions of the folder
// "docs" in memory and records the restores asked of it.
type versionsEngine struct {
	fakeEngine
	local    []versions.Version       // newest first
	remote   []backup.ReceiverVersion // newest first
	failWith error                    // RestoreVersion's error, if any
	mu       sync.Mutex
	restored []string // "<version>→<toDir>"
}

func (e *versionsEngine) Versions(_ context.Context, folderID, path string) ([]versions.Version, error) {
	if folderID != "docs" {
		return nil, engine.ErrNoFolder
	}
	var out []versions.Version
	for _, v := range e.local {
		if path == "" || v.Path == path {
			out = append(out, v)
		}
	}
	return out, nil
}

func (e *versionsEngine) ReceiverVersions(_ context.Context, folderID, path string) ([]backup.ReceiverVersion, error) {
	if folderID != "docs" {
		return nil, engine.ErrNoFolder
	}
	var out []backup.ReceiverVersion
	for _, v := range e.remote {
		if path == "" || v.Path == path {
			out = append(out, v)
		}
	}
	return out, nil
}

func (e *versionsEngine) RestoreVersion(_ context.Context, folderID, id, toDir string) (string, error) {
	if e.failWith != nil {
		return "", e.failWith
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.restored = append(e.restored, folderID+":"+id+"→"+toDir)
	return "/data/docs/x", nil
}

func (e *versionsEngine) restores() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{}, e.restored...)
}

const evilName = `<script>alert(1)</script>.txt`

// newVersionsServer serves a folder "docs" holding evilName (with two
// local versions and a deleted and a live receiver version), "report.txt"
// and the deleted "gone.txt".
func newVersionsServer(t *testing.T) (string, *versionsEngine, *http.Client) {
	t.Helper()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var recv crypt.DeviceID
	recv[0] = 0xab
	eng := &versionsEngine{
		local: []versions.Version{
			{Path: evilName, ID: "v-new", Time: base.Add(2 * time.Hour), Size: 20},
			{Path: evilName, ID: "v-old", Time: base, Size: 10},
			{Path: "report.txt", ID: "r-1", Time: base, Size: 5},
		},
		remote: []backup.ReceiverVersion{
			{Path: evilName, ID: "ab-3", Stored: base.Add(3 * time.Hour), Deleted: true, Receiver: recv},
			{Path: evilName, ID: "ab-1", Stored: base.Add(time.Hour), Size: 15, Receiver: recv},
		},
	}
	ts, database := newTestServerEngine(t, eng)
	ctx := context.Background()
	if err := database.PutFolder(ctx, db.Folder{ID: "docs", Path: "/data/docs", Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	recs := []db.FileRecord{
		{Name: evilName, Type: db.TypeFile, Size: 30, ModTime: base, Sequence: 1},
		{Name: "report.txt", Type: db.TypeFile, Size: 5, ModTime: base, Sequence: 2},
		{Name: "gone.txt", Type: db.TypeFile, ModTime: base, Deleted: true, Sequence: 3},
	}
	if err := database.PutFiles(ctx, "docs", db.LocalDevice, recs); err != nil {
		t.Fatal(err)
	}
	return ts.URL, eng, setUp(t, ts.URL)
}

func getBody(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func versionsURL(base, q, path string) string {
	return base + "/folders/docs/versions?" + url.Values{"q": {q}, "path": {path}}.Encode()
}

func TestVersionsPageNeedsSession(t *testing.T) {
	base, eng, c := newVersionsServer(t)
	anon := browser(t)
	resp, err := anon.Get(versionsURL(base, "", evilName))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("GET versions without a session: %s to %q, want 303 to /login", resp.Status, resp.Header.Get("Location"))
	}
	// Even with a stolen token, no session means no restore.
	tok := formToken(t, c, base, "/folders/docs/versions")
	resp = post(t, anon, base+"/folders/docs/versions/restore", url.Values{"csrf": {tok}, "path": {evilName}, "version": {"v-old"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("POST restore without a session: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if got := eng.restores(); len(got) != 0 {
		t.Errorf("restores without a session: %v", got)
	}
	// The folder page links to the versions page.
	if code, body := getBody(t, c, base+"/folders/docs"); code != http.StatusOK || !strings.Contains(body, `href="/folders/docs/versions"`) {
		t.Errorf("GET /folders/docs: %d, link to versions missing", code)
	}
	for _, p := range []string{"/folders/nope/versions", "/folders/..%2Fx/versions", "/folders/%3Cb%3E/versions"} {
		if code, body := getBody(t, c, base+p); code != http.StatusNotFound || strings.Contains(body, "<b>") {
			t.Errorf("GET %s: %d, want 404 without markup", p, code)
		}
	}
}

func TestVersionsPageRestoreCSRF(t *testing.T) {
	base, eng, c := newVersionsServer(t)
	tok := formToken(t, c, base, "/folders/docs/versions?path=report.txt")
	form := func(csrf string) url.Values {
		v := url.Values{"path": {evilName}, "version": {"v-old"}}
		if csrf != "-" {
			v.Set("csrf", csrf)
		}
		return v
	}
	for _, bad := range []string{"-", "", tok + "x", tok[:len(tok)-1]} {
		if resp := post(t, c, base+"/folders/docs/versions/restore", form(bad)); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST restore with csrf %q: %s, want 403", bad, resp.Status)
		}
	}
	if got := eng.restores(); len(got) != 0 {
		t.Fatalf("a refused form restored %v", got)
	}
	resp := post(t, c, base+"/folders/docs/versions/restore", form(tok))
	want := "/folders/docs/versions?path=" + url.QueryEscape(evilName)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
		t.Fatalf("POST restore: %s to %q, want 303 to %q", resp.Status, resp.Header.Get("Location"), want)
	}
	if got := eng.restores(); len(got) != 1 || got[0] != "docs:v-old→" {
		t.Fatalf("restores = %v, want [docs:v-old→] (in place)", got)
	}
	if got := flashOf(t, c, base+want); got != `Restored &lt;script&gt;alert(1)&lt;/script&gt;.txt.` {
		t.Errorf("the outcome on the page: %q", got)
	}
	// The flash is shown once.
	if _, body := getBody(t, c, base+want); strings.Contains(body, `id="flash"`) {
		t.Error("the outcome is shown twice")
	}
	// A failed restore shows its error.
	eng.failWith = fs.ErrNotExist
	post(t, c, base+"/folders/docs/versions/restore", form(tok))
	if got := flashOf(t, c, base+want); !strings.HasPrefix(got, "Error: ") {
		t.Errorf("the failure on the page: %q", got)
	}
	// A form without a version restores nothing.
	eng.failWith = nil
	post(t, c, base+"/folders/docs/versions/restore", url.Values{"csrf": {tok}, "path": {evilName}})
	if got := flashOf(t, c, base+want); got != "Error: Choose a version to restore." {
		t.Errorf("an empty version: flash %q", got)
	}
	if got := eng.restores(); len(got) != 1 {
		t.Errorf("restores = %v, want only the first", got)
	}
}

func TestVersionsPageEscapesAndOrders(t *testing.T) {
	base, eng, c := newVersionsServer(t)
	code, body := getBody(t, c, versionsURL(base, "", evilName))
	recv := eng.remote[0].Receiver.String()
	short := recv[:strings.IndexByte(recv, '-')]
	if code != http.StatusOK {
		t.Fatalf("GET versions: %d", code)
	}
	if strings.Contains(body, "<script>alert") {
		t.Fatal("a file name is not escaped")
	}
	for _, want := range []string{
		`<span id="version-path">&lt;script&gt;alert(1)&lt;/script&gt;.txt</span>`,
		`path=%3cscript%3ealert%281%29%3c%2fscript%3e.txt`,
		`>report.txt</a>`, `>gone.txt</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in\n%s", want, body)
		}
	}
	// Newest first: deleted receiver copy, v-new, receiver ab-1, v-old;
	// the deletion has no Restore button.
	i3, iNew, i1, iOld := strings.Index(body, `data-version="ab-3"`), strings.Index(body, `data-version="v-new"`), strings.Index(body, `data-version="ab-1"`), strings.Index(body, `data-version="v-old"`)
	if i3 < 0 || iNew < 0 || i1 < 0 || iOld < 0 || !(i3 < iNew && iNew < i1 && i1 < iOld) {
		t.Errorf("versions not newest first: %d %d %d %d", i3, iNew, i1, iOld)
	}
	if n := strings.Count(body, `class="restore"`); n != 3 {
		t.Errorf("%d Restore buttons, want 3 (not for the deletion)", n)
	}
	if strings.Contains(body, `version=ab-3`) {
		t.Error("the deletion can be restored")
	}
	// A receiver without a name here shows as its short ID.
	if n := strings.Count(body, `<td class="source" data-label="Where">`+short+`</td>`); n != 2 {
		t.Errorf("receiver source shown %d times, want 2:\n%s", n, body)
	}
	if n := strings.Count(body, `<td class="source" data-label="Where">this device</td>`); n != 2 {
		t.Errorf("local source shown %d times, want 2", n)
	}
}

func TestVersionsPageSearch(t *testing.T) {
	base, _, c := newVersionsServer(t)
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"", []string{"gone.txt", "report.txt", "&lt;script&gt;"}},
		{"REP", []string{"report.txt"}},
		{"<script>", []string{"&lt;script&gt;"}},
		{".txt", []string{"gone.txt", "report.txt", "&lt;script&gt;"}},
		{"nothing", nil},
	} {
		_, body := getBody(t, c, versionsURL(base, tc.q, ""))
		tbl := body[strings.Index(body, `<table id="version-files">`):]
		tbl = tbl[:strings.Index(tbl, "</table>")]
		if got := strings.Count(tbl, "<a href="); got != len(tc.want) {
			t.Errorf("q=%q: %d files listed, want %d", tc.q, got, len(tc.want))
		}
		for _, w := range tc.want {
			if !strings.Contains(tbl, w) {
				t.Errorf("q=%q: %s missing", tc.q, w)
			}
		}
		if tc.want == nil && !strings.Contains(tbl, "No files match.") {
			t.Errorf("q=%q: no empty-result note", tc.q)
		}
		if !strings.Contains(body, fmt.Sprintf(`id="version-q" value="%s"`, strings.ReplaceAll(strings.ReplaceAll(tc.q, "<", "&lt;"), ">", "&gt;"))) {
			t.Errorf("q=%q: the search box lost the query", tc.q)
		}
		if strings.Contains(body, `id="versions"`) {
			t.Errorf("q=%q: versions listed without a chosen file", tc.q)
		}
	}
}

// hashEngine is a versionsEngine whose folder "docs" has no versioning.
type hashEngine struct {
	*versionsEngine
}

func (hashEngine) Versioning(context.Context, string) (versions.Policy, error) {
	return versions.Policy{Type: versions.None}, nil
}

// TestVersionsPageTellsApart: the versions page shows the file as it is
// now, each version's size and a short content hash (so two versions of
// one time differ), marks the version the file is like now, names a
// receiver by its name, lists no directory as a file, and asks before a
// restore in place; a deleted file with nothing kept says why.
func TestVersionsPageTellsApart(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 12, 4, 3, 30, 1, 0, time.UTC)
	writeTestFile(t, filepath.Join(root, "report.txt"), "now")
	writeTestFile(t, filepath.Join(root, filepath.FromSlash(versions.Dir), "report~20261204-033001.txt"), "now")
	writeTestFile(t, filepath.Join(root, filepath.FromSlash(versions.Dir), "report~20261204-033001-2.txt"), "then")
	var vps crypt.DeviceID
	vps[0] = 0xab
	eng := hashEngine{&versionsEngine{
		local: []versions.Version{
			{Path: "report.txt", ID: "report~20261204-033001.txt", Time: at, Size: 3},
			{Path: "report.txt", ID: "report~20261204-033001-2.txt", Time: at, Size: 4},
		},
		remote: []backup.ReceiverVersion{{Path: "report.txt", ID: "ab-1", Stored: at, Size: 3, Receiver: vps}},
	}}
	ts, database := newTestServerEngine(t, eng)
	ctx := context.Background()
	if err := database.PutFolder(ctx, db.Folder{ID: "docs", Path: root, Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	if err := database.PutDevice(ctx, db.Device{ID: vps.String(), Name: "vps-backup", Untrusted: true}); err != nil {
		t.Fatal(err)
	}
	if err := database.ShareFolder(ctx, "docs", vps.String()); err != nil {
		t.Fatal(err)
	}
	if err := database.PutFiles(ctx, "docs", db.LocalDevice, []db.FileRecord{
		// One chunk of 3 bytes: another content than the receiver's
		// version, which has none here.
		{Name: "report.txt", Type: db.TypeFile, Size: 3, ModTime: at, Sequence: 1, Chunks: append([]byte{1, 3}, make([]byte, 32)...)},
		{Name: "sub", Type: db.TypeDir, ModTime: at, Sequence: 2},
		{Name: "gone.txt", Type: db.TypeFile, ModTime: at, Deleted: true, Sequence: 3},
	}); err != nil {
		t.Fatal(err)
	}
	c := setUp(t, ts.URL)
	_, body := getBody(t, c, versionsURL(ts.URL, "", "report.txt"))
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:])[:shortHash] }
	for _, want := range []string{
		`id="current-file"`, `<code class="hash" title="SHA-256 of the content">` + sum("now") + `</code></td><td data-label="Where"><strong>current</strong>`,
		`class="version is-current" data-version="report~20261204-033001.txt"`, sum("now") + `</code> <strong class="current-mark">= current</strong>`,
		`class="version" data-version="report~20261204-033001-2.txt"`, sum("then") + `</code></td>`,
		`<td class="source" data-label="Where">vps-backup</td>`, `class="version" data-version="ab-1"`,
		`href="/folders/docs/versions/restore?path=report.txt&amp;version=report~20261204-033001-2.txt" class="restore"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the versions page lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, `path=sub"`) || strings.Contains(body, ">sub</a>") {
		t.Errorf("a directory is listed as a file:\n%s", body)
	}
	if _, page := getBody(t, c, versionsURL(ts.URL, "", "sub")); !strings.Contains(page, `id="versions-why">sub is a directory`) {
		t.Errorf("the versions of a directory:\n%s", page)
	}
	_, page := getBody(t, c, versionsURL(ts.URL, "", "gone.txt"))
	if want := `id="versions-why">gone.txt was deleted and cannot be restored: versioning is off for this folder`; !strings.Contains(page, want) || !strings.Contains(page, "none of its receivers is connected now") {
		t.Errorf("a deleted file with nothing kept:\n%s", page)
	}
	// The restore asks first, and says what it replaces.
	_, confirm := getBody(t, c, ts.URL+"/folders/docs/versions/restore?path=report.txt&version=report~20261204-033001-2.txt")
	for _, want := range []string{`id="confirm-question">Restore the version of report.txt from 2026-12-04 03:30:01 UTC (4 B, this device, ` + sum("then") + `) in place?`, "is kept among the versions", `name="version" value="report~20261204-033001-2.txt"`} {
		if !strings.Contains(confirm, want) {
			t.Errorf("the restore's confirm page lacks %s:\n%s", want, confirm)
		}
	}
	if got := eng.restores(); len(got) != 0 {
		t.Errorf("asking restored %v", got)
	}
}

func writeTestFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
