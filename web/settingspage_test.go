package web

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/engine"
	"lockstep/sync/receiver"
	"lockstep/sync/versions"
)

// settingsEngine keeps the versioning policy of "docs" in memory and
// records whole-folder restores from receivers.
type settingsEngine struct {
	fakeEngine
	mu       sync.Mutex
	policy   versions.Policy
	remote   []backup.ReceiverVersion // newest first
	restored []string                 // "<id>,<id>→<toDir>"
}

func (e *settingsEngine) Versioning(_ context.Context, folderID string) (versions.Policy, error) {
	if folderID != "docs" {
		return versions.Policy{}, engine.ErrNoFolder
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.policy, nil
}

func (e *settingsEngine) SetVersioning(_ context.Context, folderID string, p versions.Policy) error {
	if folderID != "docs" {
		return engine.ErrNoFolder
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.policy = p
	return nil
}

func (e *settingsEngine) ReceiverVersions(_ context.Context, folderID, path string) ([]backup.ReceiverVersion, error) {
	if folderID != "docs" {
		return nil, engine.ErrNoFolder
	}
	return e.remote, nil
}

func (e *settingsEngine) RestoreFromReceiver(_ context.Context, folderID string, vs []backup.ReceiverVersion, toDir string) ([]string, error) {
	var ids, out []string
	for _, v := range vs {
		ids = append(ids, v.ID)
		out = append(out, filepath.Join(toDir, v.Path))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.restored = append(e.restored, strings.Join(ids, ",")+"→"+toDir)
	return out, nil
}

func (e *settingsEngine) restores() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{}, e.restored...)
}

// fakeReceiver holds "vault": its retention in memory, and records prunes.
type fakeReceiver struct {
	Receiver
	mu     sync.Mutex
	policy receiver.Policy
	prunes []receiver.PruneOptions
}

func (r *fakeReceiver) Retention(_ context.Context, folderID string) (receiver.Policy, error) {
	if folderID != "vault" {
		return receiver.Policy{}, receiver.ErrNotHeld
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.policy, nil
}

func (r *fakeReceiver) SetRetention(_ context.Context, folderID string, p receiver.Policy) error {
	if folderID != "vault" {
		return receiver.ErrNotHeld
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.policy = p
	return nil
}

// Status reports 12 chunks of 3 KiB stored for 4.5 KiB referenced.
func (r *fakeReceiver) Status(context.Context, string) (receiver.Status, error) {
	return receiver.Status{Records: 5, Files: 2, Chunks: 12, StoredBytes: 3072, ReferencedBytes: 4608, DedupRatio: 1.5}, nil
}

// Prune reports 3 versions of 2 files, 7 chunks of 2 KiB gone, 4 kept.
func (r *fakeReceiver) Prune(_ context.Context, folderID string, o receiver.PruneOptions) (receiver.PruneResult, error) {
	if folderID != "vault" {
		return receiver.PruneResult{}, receiver.ErrNotHeld
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prunes = append(r.prunes, o)
	return receiver.PruneResult{Records: 3, Files: 2, Chunks: 7, Bytes: 2048, Kept: 4}, nil
}

func (r *fakeReceiver) pruned() []receiver.PruneOptions {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receiver.PruneOptions{}, r.prunes...)
}

// newSettingsServer serves the trusted folder "docs" and the encrypted
// folder "vault" held by this node as a receiver, over real SQLite.
func newSettingsServer(t *testing.T) (string, *settingsEngine, *fakeReceiver, *http.Client) {
	t.Helper()
	database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close() })
	ctx := context.Background()
	for _, f := range []db.Folder{{ID: "docs", Path: "/data/docs", Type: db.SendReceive}, {ID: "vault", Path: "/data/vault", Type: db.Encrypted}} {
		if err := database.PutFolder(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	var id, recv crypt.DeviceID
	id[0], recv[0] = 7, 0xab
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	eng := &settingsEngine{remote: []backup.ReceiverVersion{
		{Path: evilName, ID: "ab-3", Stored: base.Add(3 * time.Hour), Deleted: true, Receiver: recv},
		{Path: "b.txt", ID: "ab-2", Stored: base.Add(2 * time.Hour), Size: 3, Receiver: recv},
		{Path: evilName, ID: "ab-1", Stored: base.Add(time.Hour), Size: 15, Receiver: recv},
	}}
	rcv := &fakeReceiver{}
	s, err := New(ctx, "127.0.0.1:0", Config{ID: id, DB: database, Conns: fakeConns{}, Engine: eng, Backup: backupOf(eng), Receiver: rcv, APIKey: testKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := serveTest(t, s)
	return ts.URL, eng, rcv, setUp(t, ts.URL)
}

var flashElement = regexp.MustCompile(`<p class="flash( flash-error)?" id="flash" role="(alert|status)">([^<]*)</p>`)

// flashOf returns the flash message of the page at u ("" without one),
// with "Error: " before one shown as an error (which must be an alert).
func flashOf(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	_, body := getBody(t, c, u)
	m := flashElement.FindStringSubmatch(body)
	if m == nil {
		if strings.Contains(body, `id="flash"`) {
			t.Fatalf("GET %s: a flash of an unknown form in %s", u, body)
		}
		return ""
	}
	isErr := m[1] != ""
	if isErr != (m[2] == "alert") {
		t.Fatalf("GET %s: flash %q: error style %v, role %s", u, m[3], isErr, m[2])
	}
	if isErr {
		return "Error: " + m[3]
	}
	return m[3]
}

func TestSettingsVersioningForm(t *testing.T) {
	base, eng, _, c := newSettingsServer(t)
	page := base + "/folders/docs/settings"
	if code, body := getBody(t, c, base+"/folders/docs"); code != http.StatusOK || !strings.Contains(body, `href="/folders/docs/settings"`) {
		t.Errorf("GET /folders/docs: %d, link to settings missing", code)
	}
	code, body := getBody(t, c, page)
	if code != http.StatusOK || !strings.Contains(body, `<option value="none" selected>`) || strings.Contains(body, `id="retention-form"`) {
		t.Fatalf("GET settings: %d, want versioning none and no retention:\n%s", code, body)
	}
	tok := formToken(t, c, base, "/folders/docs/settings")
	form := url.Values{"type": {"simple"}, "keep": {"7"}, "days": {""}}
	for _, bad := range []string{"", tok + "x"} {
		form.Set("csrf", bad)
		if resp := post(t, c, base+"/folders/docs/settings/versioning", form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST versioning with csrf %q: %s, want 403", bad, resp.Status)
		}
	}
	if p, _ := eng.Versioning(context.Background(), "docs"); p.Type != "" {
		t.Fatalf("a refused form set %+v", p)
	}
	form.Set("csrf", tok)
	resp := post(t, c, base+"/folders/docs/settings/versioning", form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/folders/docs/settings" {
		t.Fatalf("POST versioning: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if p, _ := eng.Versioning(context.Background(), "docs"); p != (versions.Policy{Type: versions.Simple, Keep: 7}) {
		t.Errorf("policy = %+v, want simple keep 7", p)
	}
	if got := flashOf(t, c, page); got != "Versioning saved." {
		t.Errorf("flash %q after saving", got)
	}
	_, body = getBody(t, c, page)
	for _, want := range []string{`<option value="simple" selected>`, `id="versioning-keep" value="7"`, `id="versioning-days" value="0"`} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q after saving:\n%s", want, body)
		}
	}
	// Refused policies show their error and change nothing.
	for _, tc := range []struct{ typ, keep, days, want string }{
		{"trashcan", "3", "", "keep applies only to simple"},
		{"simple", "-1", "", "Keep: enter a whole number"},
		{"simple", "x", "", "Keep: enter a whole number"},
		{"staggered", "", "36501", "days 36501 is not in"},
		{"<b>bad</b>", "", "", `unknown type &#34;&lt;b&gt;bad&lt;/b&gt;&#34;`},
	} {
		post(t, c, base+"/folders/docs/settings/versioning", url.Values{"csrf": {tok}, "type": {tc.typ}, "keep": {tc.keep}, "days": {tc.days}})
		if got := flashOf(t, c, page); !strings.HasPrefix(got, "Error: ") || !strings.Contains(got, tc.want) {
			t.Errorf("%s keep %q days %q: flash %q, want an error with %q", tc.typ, tc.keep, tc.days, got, tc.want)
		}
	}
	// The boundary passes.
	post(t, c, base+"/folders/docs/settings/versioning", url.Values{"csrf": {tok}, "type": {"staggered"}, "days": {"36500"}})
	if p, _ := eng.Versioning(context.Background(), "docs"); p != (versions.Policy{Type: versions.Staggered, Days: 36500}) {
		t.Errorf("policy = %+v, want staggered 36500 days", p)
	}
}

func TestSettingsRetentionPreviewPrune(t *testing.T) {
	base, _, rcv, c := newSettingsServer(t)
	page := base + "/folders/vault/settings"
	code, body := getBody(t, c, page)
	if code != http.StatusOK || !strings.Contains(body, `id="retention-form"`) || strings.Contains(body, `id="versioning-form"`) {
		t.Fatalf("GET vault settings: %d, want a retention form only:\n%s", code, body)
	}
	tok := formToken(t, c, base, "/folders/vault/settings")
	fields := []string{"keepLast", "keepHourly", "keepDaily", "keepWeekly", "keepMonthly", "keepYearly", "keepDeletedDays"}
	form := url.Values{}
	for i, f := range fields {
		form.Set(f, string(rune('1'+i)))
	}
	for _, u := range []string{"/settings/retention", "/settings/prune"} {
		if resp := post(t, c, base+"/folders/vault"+u, form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s without csrf: %s, want 403", u, resp.Status)
		}
	}
	if rcv.policy != (receiver.Policy{}) || len(rcv.pruned()) != 0 {
		t.Fatalf("refused forms changed %+v / pruned %v", rcv.policy, rcv.pruned())
	}
	form.Set("csrf", tok)
	post(t, c, base+"/folders/vault/settings/retention", form)
	want := receiver.Policy{KeepLast: 1, KeepHourly: 2, KeepDaily: 3, KeepWeekly: 4, KeepMonthly: 5, KeepYearly: 6, KeepDeletedDays: 7}
	if got, _ := rcv.Retention(context.Background(), "vault"); got != want {
		t.Errorf("retention = %+v, want %+v", got, want)
	}
	if got := flashOf(t, c, page); got != "Retention saved." {
		t.Errorf("flash %q after saving", got)
	}
	_, body = getBody(t, c, page)
	for i, f := range fields {
		if w := `name="` + f + `" value="` + string(rune('1'+i)) + `"`; !strings.Contains(body, w) {
			t.Errorf("missing %s", w)
		}
	}
	form.Set("keepWeekly", "-1")
	post(t, c, base+"/folders/vault/settings/retention", form)
	if got := flashOf(t, c, page); !strings.Contains(got, "Error: Keep weekly: enter a whole number") {
		t.Errorf("negative count: flash %q", got)
	}
	if got, _ := rcv.Retention(context.Background(), "vault"); got != want {
		t.Errorf("a refused form changed retention to %+v", got)
	}
	// Preview is a dry run with the saved policy when the form sends
	// none; Prune now is not.
	resp, err := c.PostForm(base+"/folders/vault/settings/prune", url.Values{"csrf": {tok}, "dryRun": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `id="prune-preview-result" role="status">A prune would drop 3 versions (2 files entirely), 7 chunks, 2.0 KiB; 4 versions kept.</p>`; resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
		t.Errorf("preview: %s, lacks %s:\n%s", resp.Status, want, b)
	}
	if p := rcv.pruned(); len(p) != 1 || p[0].Try != nil {
		t.Errorf("the preview without values tried %+v", p)
	}
	post(t, c, base+"/folders/vault/settings/prune", url.Values{"csrf": {tok}})
	if got := flashOf(t, c, page); !strings.HasPrefix(got, "Pruned 3 versions") {
		t.Errorf("prune flash %q", got)
	}
	if got := rcv.pruned(); len(got) != 2 || !got[0].DryRun || got[1].DryRun || got[0].Grace != time.Hour {
		t.Errorf("prunes = %+v, want a dry run then a prune, grace 1h", got)
	}
	// A trusted folder has no retention and is not pruned from here.
	tok = formToken(t, c, base, "/folders/docs/settings")
	post(t, c, base+"/folders/docs/settings/prune", url.Values{"csrf": {tok}, "dryRun": {"1"}})
	if got := flashOf(t, c, base+"/folders/docs/settings"); !strings.HasPrefix(got, "Error: ") {
		t.Errorf("prune of docs: flash %q", got)
	}
	if len(rcv.pruned()) != 2 {
		t.Error("docs was pruned")
	}
}

func TestVersionsPageRestoreAll(t *testing.T) {
	base, eng, _, c := newSettingsServer(t)
	page := base + "/folders/docs/versions"
	tok := formToken(t, c, base, "/folders/docs/versions")
	if resp := post(t, c, page+"/restore-all", url.Values{"at": {"2026-01-02T04:30"}, "to": {"/r"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST restore-all without csrf: %s", resp.Status)
	}
	if got := eng.restores(); len(got) != 0 {
		t.Fatalf("a refused form restored %v", got)
	}
	// ab-1 is stored at 04:04:05, ab-2 at 05:04:05, the deletion at 06:04:05.
	for _, tc := range []struct{ at, ids, flash string }{
		{"2026-01-02T04:04:04", "", "Error: Nothing to restore: no file of docs had a version kept at 2026-01-02T04:04:04Z. Choose a later time."},
		{"2026-01-02T04:04:05", "ab-1", "Restored 1 files as of 2026-01-02T04:04:05Z into /r &lt;x&gt;."},
		{"2026-01-02T05:05", "ab-1,ab-2", "Restored 2 files as of 2026-01-02T05:05:00Z into /r &lt;x&gt;."},
		{"2026-01-02T07:04:05+01:00", "ab-2", "Restored 1 files as of 2026-01-02T06:04:05Z into /r &lt;x&gt;."},
	} {
		before := len(eng.restores())
		resp := post(t, c, page+"/restore-all", url.Values{"csrf": {tok}, "at": {tc.at}, "to": {"/r <x>"}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/folders/docs/versions" {
			t.Fatalf("POST restore-all: %s to %q", resp.Status, resp.Header.Get("Location"))
		}
		got := eng.restores()
		if len(got) != before+1 || got[before] != tc.ids+"→/r <x>" {
			t.Errorf("at %s: restores %v, want %q", tc.at, got[before:], tc.ids+"→/r <x>")
		}
		if f := flashOf(t, c, page); f != tc.flash {
			t.Errorf("at %s: flash %q, want %q", tc.at, f, tc.flash)
		}
	}
	before := len(eng.restores())
	for _, tc := range []struct{ at, to, want string }{
		{"yesterday", "/r", "Error: Time &#34;yesterday&#34;"},
		{"", "/r", "Error: Time"},
		{"2026-01-02T05:05", " ", "Error: Name the directory"},
	} {
		post(t, c, page+"/restore-all", url.Values{"csrf": {tok}, "at": {tc.at}, "to": {tc.to}})
		if f := flashOf(t, c, page); !strings.HasPrefix(f, tc.want) {
			t.Errorf("at %q to %q: flash %q, want %q", tc.at, tc.to, f, tc.want)
		}
	}
	if got := eng.restores(); len(got) != before {
		t.Errorf("refused forms restored %v", got[before:])
	}
}

// TestSettingsPreviewTyped: the preview tries the retention typed in the
// form without saving it, and shows it still in the form; Prune now asks
// first, saying what goes; all-zero keep counts are explained.
func TestSettingsPreviewTyped(t *testing.T) {
	base, _, rcv, c := newSettingsServer(t)
	page := base + "/folders/vault/settings"
	_, body := getBody(t, c, page)
	for _, want := range []string{`id="retention-zero"`, `id="retention-keeps-all">Now this folder keeps every version.`, `href="/folders/vault/settings/prune" id="prune-now"`, `formaction="/folders/vault/settings/prune" name="dryRun" value="1"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the settings page lacks %s:\n%s", want, body)
		}
	}
	tok := formToken(t, c, base, "/folders/vault/settings")
	resp, err := c.PostForm(page+"/prune", url.Values{"csrf": {tok}, "dryRun": {"1"}, "keepLast": {"2"}, "keepDaily": {"9"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`These values are not saved yet`, `name="keepLast" value="2"`, `name="keepDaily" value="9"`, `id="prune-preview-result"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the preview lacks %s:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), `id="retention-keeps-all"`) {
		t.Error("values that keep by count are said to keep every version")
	}
	p := rcv.pruned()
	if len(p) != 1 || !p[0].DryRun || p[0].Try == nil || *p[0].Try != (receiver.Policy{KeepLast: 2, KeepDaily: 9}) {
		t.Fatalf("the preview pruned %+v, want a dry run trying keep last 2, daily 9", p)
	}
	if got, _ := rcv.Retention(context.Background(), "vault"); got != (receiver.Policy{}) {
		t.Errorf("the preview saved %+v", got)
	}
	// Prune now: a confirm page that says what goes, from a dry run.
	_, confirm := getBody(t, c, page+"/prune")
	if want := `id="confirm-note">It drops 3 versions (2 files entirely), 7 chunks, 2.0 KiB; 4 versions kept.`; !strings.Contains(confirm, want) || !strings.Contains(confirm, `action="/folders/vault/settings/prune"`) {
		t.Errorf("the prune's confirm page lacks %s:\n%s", want, confirm)
	}
	if p := rcv.pruned(); len(p) != 2 || !p[1].DryRun || p[1].Try != nil {
		t.Errorf("asking pruned %+v", p)
	}
}
