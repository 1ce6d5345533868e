package test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCLIReceiver: the CLI on both sides of an encrypted backup. On the
// receiver, plain status shows what it stores, `folder retention ID`
// without flags prints the policy (it used to reset it to zeros),
// versions and versioning say what a receiver can do instead of "no
// folder"; on the trusted device, a wrong password exits 4, and
// `restore --all --at T` with nothing at T says so and fails.
func TestCLIReceiver(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	a, r := startNode(t, "a"), startNode(t, "r")
	dir := filepath.Join(t.TempDir(), "a")
	writeFile(t, filepath.Join(dir, "x.txt"), []byte("kept safe"), 0o644)
	writeFile(t, filepath.Join(dir, "d", "y.txt"), []byte("also kept"), 0o644)
	a.cli("folder", "add", "docs", dir)
	holdFolder(t, r, "docs", a)
	pw, wrong := passwordFile(t, "right"), passwordFile(t, "wrong")
	backUpTo(t, a, r, "docs", pw)
	waitBackedUp(t, a, r, "docs")

	// retention
	{
		r.cli("folder", "retention", "docs", "--keep-last", "3", "--keep-daily", "7")
		out := r.cli("folder", "retention", "docs")
		if !strings.Contains(out, "keep-last 3") || !strings.Contains(out, "keep-daily 7") {
			t.Errorf("folder retention docs printed %q; want the policy", out)
		}
		// A flag given changes that value only.
		r.cli("folder", "retention", "docs", "--keep-hourly", "2")
		var p struct{ KeepLast, KeepHourly, KeepDaily int }
		decodeJSON(t, r.cli("folder", "retention", "docs", "--json"), &p)
		if p.KeepLast != 3 || p.KeepHourly != 2 || p.KeepDaily != 7 {
			t.Errorf("retention after showing it and setting --keep-hourly: %+v; want keepLast 3, keepHourly 2, keepDaily 7", p)
		}
	}

	// receiver status
	{
		out := r.cli("status")
		st := r.encFolder("docs").Receiver
		if st == nil {
			t.Fatal("the receiver's status has no receiver part")
		}
		held := fmt.Sprintf("%d records of %d files", st.Records, st.Files)
		for _, want := range []string{"folder docs", held, "stored", "last contact"} {
			if !strings.Contains(out, want) {
				t.Errorf("status on the receiver lacks %q:\n%s", want, out)
			}
		}
	}

	// receiver versions
	{
		for _, args := range [][]string{{"versions", "docs"}, {"folder", "versioning", "docs"}, {"folder", "versioning", "docs", "--type", "simple"}} {
			res := run(t, r.home, args...)
			if res.code != 1 || strings.Contains(res.stderr, "no folder") ||
				!strings.Contains(res.stderr, "receiver") || !strings.Contains(res.stderr, "folder retention docs") || !strings.Contains(res.stderr, "trusted device") {
				t.Errorf("lockstep %s on the receiver: exit %d, stderr %q", strings.Join(args, " "), res.code, res.stderr)
			}
			assertOneLineError(t, res)
		}
	}

	// restore nothing at T
	{
		to := filepath.Join(t.TempDir(), "then")
		res := run(t, a.home, "restore", "docs", "--all", "--at", "2001-01-01T00:00:00Z", "--to", to)
		if res.code != 1 || !strings.Contains(res.stderr, "nothing to restore") || res.stdout != "" {
			t.Errorf("restore --all before the first backup: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
		}
		var got struct{ Restored []string }
		decodeJSON(t, a.cli("restore", "docs", "--all", "--at", time.Now().Add(time.Minute).UTC().Format(time.RFC3339), "--to", to, "--json"), &got)
		if !slices.Contains(got.Restored, filepath.Join(to, "x.txt")) || !slices.Contains(got.Restored, filepath.Join(to, "d", "y.txt")) {
			t.Errorf("restore --all --json: %+v; want x.txt and d/y.txt", got)
		}
	}

	// verification exits 4
	{
		res := run(t, a.home, "folder", "share", "docs", r.ID, "--password-file", wrong)
		if res.code != 4 || !strings.Contains(res.stderr, "wrong password") {
			t.Errorf("share with a wrong password: exit %d, stderr %q; want 4", res.code, res.stderr)
		}
		assertOneLineError(t, res)
		home := newDeviceFor(t, r, "docs")
		dst := filepath.Join(t.TempDir(), "recovered")
		res = run(t, home, recoverArgs(r, "docs", wrong, dst)...)
		if res.code != 4 {
			t.Errorf("recover with a wrong password: exit %d, stderr %q; want 4", res.code, res.stderr)
		}
		var rec struct {
			Files  int64  `json:"files"`
			Folder string `json:"folder"`
		}
		decodeJSON(t, mustRun(t, home, append(recoverArgs(r, "docs", pw, dst), "--json")...), &rec)
		if rec.Files != 2 || rec.Folder != "docs" {
			t.Errorf("recover --json: %+v", rec)
		}
	}
}

// decodeJSON decodes out, which must be exactly one JSON value (nothing
// else on stdout), into v.
func decodeJSON(t testing.TB, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("not one JSON value: %v\n%s", err, out)
	}
}
