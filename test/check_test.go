package test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/blob/local"
	"lockstep/storage/blob/s3"
	"lockstep/storage/blob/s3/s3test"
	"lockstep/sync/check"
	"lockstep/test/testutil"
	"lockstep/web"
)

// checkRun runs `check` on n with args and decodes its --json result.
func checkRun(t *testing.T, n *node, args ...string) (web.CheckResult, result) {
	t.Helper()
	res := run(t, n.home, append([]string{"check", "--json"}, args...)...)
	var out web.CheckResult
	if res.code == 0 || res.code == 4 {
		if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
			t.Fatalf("check %v: exit %d, stdout %q does not decode: %v (stderr %q)", args, res.code, res.stdout, err, res.stderr)
		}
	}
	return out, res
}

// problemsOf lists a result's problems as "kind path".
func problemsOf(res web.CheckResult) []string {
	var out []string
	for _, r := range res.Reports {
		for _, p := range r.Problems {
			out = append(out, string(p.Kind)+" "+p.Path)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// storeFiles lists the files under dir/blobs/r/*/sub/ of a node's home.
func storeFiles(t *testing.T, home, sub string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(home, "blobs", "r")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		parts := strings.Split(rel, string(filepath.Separator))
		if !d.IsDir() && len(parts) > 2 && parts[1] == sub {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCheck: a trusted device checks a real receiver through the binary.
// A clean store checks clean, with and without reading data; a deleted
// chunk object and a flipped byte in a pack are found by reading data and
// named by the files and versions they affect; records withheld are found
// from the metadata alone.
func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, r := startNode(t, "a"), startNode(t, "r")
	dirA := filepath.Join(t.TempDir(), "a")
	writeFile(t, filepath.Join(dirA, "big.bin"), randomBytes(1, 3<<20), 0o644)
	for i := range 6 {
		writeFile(t, filepath.Join(dirA, "small-"+string(rune('a'+i))), randomBytes(uint64(10+i), 3000+i*100), 0o644)
	}
	a.cli("folder", "add", "docs", dirA)
	backUp(t, a, r, "docs", passwordFile(t, "pw"))
	// A second version of small-a, in a log object of its own.
	writeFile(t, filepath.Join(dirA, "small-a"), []byte("the newest version of small-a\n"), 0o644)
	a.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to store small-a's new version", func() bool {
		st := r.encFolder("docs")
		return st.Receiver != nil && st.Receiver.Records == 8
	})
	waitBackedUp(t, a, r, "docs")

	out, res := checkRun(t, a, "docs")
	if res.code != 0 || !out.Clean || len(out.Reports) != 1 {
		t.Fatalf("check of a whole store: exit %d, %+v, stderr %q", res.code, out, res.stderr)
	}
	rep := out.Reports[0]
	if rep.Records != 8 || rep.Versions != 8 || rep.Chunks < 8 || rep.Mode != "metadata" || rep.BytesRead != 0 {
		t.Fatalf("metadata check counted %+v", rep)
	}
	out, res = checkRun(t, a, "docs", "--read-data")
	if res.code != 0 || !out.Clean || out.Reports[0].BytesRead < 3<<20 {
		t.Fatalf("read-data check of a whole store: exit %d, %+v", res.code, out)
	}
	human := mustRun(t, a.home, "check", "docs", "--read-data-subset", "50%")
	if !strings.Contains(human, "read-data-subset): clean") {
		t.Fatalf("check --read-data-subset printed %q", human)
	}

	// Lose one of big.bin's chunks, and damage a pack of small chunks.
	loose := storeFiles(t, r.home, "c")
	packs := storeFiles(t, r.home, "p")
	// The largest pack: the first upload's small chunks.
	slices.SortFunc(packs, func(x, y string) int { return int(fileSize(t, y) - fileSize(t, x)) })
	if len(loose) == 0 || len(packs) == 0 {
		t.Fatalf("store holds %d loose chunks and %d packs; the test needs both", len(loose), len(packs))
	}
	if len(loose) < 2 {
		t.Fatalf("big.bin is in %d loose chunks; the test needs two", len(loose))
	}
	if err := os.Remove(loose[0]); err != nil {
		t.Fatal(err)
	}
	flipped, err := os.ReadFile(loose[1])
	if err != nil {
		t.Fatal(err)
	}
	flipped[len(flipped)/3] ^= 0x01
	if err := os.WriteFile(loose[1], flipped, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/4] ^= 0x40 // in a chunk body: the pack's index is at its end
	if err := os.WriteFile(packs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, res = checkRun(t, a, "docs", "--read-data")
	if res.code != 4 || out.Clean {
		t.Fatalf("read-data check of a damaged store: exit %d, %+v", res.code, out)
	}
	got := problemsOf(out)
	if !slices.Contains(got, "missing big.bin") {
		t.Errorf("the deleted chunk of big.bin is not reported missing: %q", got)
	}
	flippedID := "chunk " + filepath.Base(loose[1])
	flippedFound := false
	for _, p := range out.Reports[0].Problems {
		flippedFound = flippedFound || p.Kind == check.Damaged && p.Object == flippedID && p.Path == "big.bin"
	}
	if !flippedFound {
		t.Errorf("the flipped byte in %s is not reported damaged against big.bin: %+v", flippedID, out.Reports[0].Problems)
	}
	damaged := false
	for _, p := range got {
		damaged = damaged || strings.HasPrefix(p, "damaged ") && p != "damaged "
	}
	if !damaged {
		t.Errorf("the flipped byte in a pack is not reported against the file whose chunk it is in: %q", got)
	}
	for _, rp := range out.Reports[0].Problems {
		if rp.Path != "" && rp.Version == "" {
			t.Errorf("problem %+v names a file but no version", rp)
		}
	}
	var st web.CheckState
	a.get("/rest/folders/docs/check", &st)
	if st.Last == nil || st.Last.Clean || st.Last.LastClean == nil {
		t.Fatalf("check state after a failed check: %+v", st)
	}
	var status web.Status
	a.get("/rest/status", &status)
	if f := status.Folders[0]; !strings.Contains(f.Error, "check found problems") || f.Check == nil || f.Check.Last == nil {
		t.Errorf("folder status after a failed check: error %q, check %+v", f.Error, f.Check)
	}

	// --repair sends the lost chunk again from a's file; a chunk of a
	// version a no longer has can't be, and the report says so.
	out, res = checkRun(t, a, "docs", "--read-data", "--repair")
	if res.code != 4 || len(out.Reports[0].Repaired) == 0 {
		t.Fatalf("check --repair: exit %d, repaired %q, not %q", res.code, out.Reports[0].Repaired, out.Reports[0].Unrepaired)
	}
	repairedBig := false
	for _, what := range out.Reports[0].Repaired {
		repairedBig = repairedBig || strings.Contains(what, "big.bin (from this device's big.bin)")
	}
	if !repairedBig {
		t.Fatalf("check --repair did not repair big.bin's chunk: repaired %q, not %q", out.Reports[0].Repaired, out.Reports[0].Unrepaired)
	}
	// The chunk with a flipped byte reads whole on the receiver: it is not
	// replaced, lest a device gone bad overwrite history that way.
	refused := false
	for _, what := range out.Reports[0].Unrepaired {
		refused = refused || strings.Contains(what, filepath.Base(loose[1])) && strings.Contains(what, "reads whole")
	}
	if !refused {
		t.Errorf("the damaged chunk that reads whole is not listed as refused: %q", out.Reports[0].Unrepaired)
	}
	out, _ = checkRun(t, a, "docs", "--read-data")
	for _, p := range problemsOf(out) {
		if p == "missing big.bin" {
			t.Errorf("after the repair a check still finds %q", p)
		}
	}

	// A receiver that drops a record from the middle of its log: the log
	// still ends where this device read it, so only a check finds it,
	// naming the file and version.
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	dropped := dropRecord(t, r.home)
	r = startNodeIn(t, "r", r.home)
	testutil.Eventually(t, 30*time.Second, "r to connect to a", func() bool { return a.connectedTo(r.ID) })
	out, res = checkRun(t, a, "docs")
	if res.code != 4 {
		t.Fatalf("check of a log with a record dropped: exit %d, %+v, stderr %q", res.code, out, res.stderr)
	}
	missing := false
	for _, p := range out.Reports[0].Problems {
		missing = missing || p.Kind == check.Missing && p.Version == fmt.Sprintf("%s-%d", a.hexID(t), dropped.counter) && p.Path != ""
	}
	if !missing {
		t.Fatalf("the dropped record (counter %d) is not reported missing with its file: %+v", dropped.counter, out.Reports[0].Problems)
	}

	// A receiver that withholds records it acknowledged: this device has
	// read its log further, refuses it when it connects, and a check says
	// why.
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	withholdRecords(t, r.home)
	r = startNodeIn(t, "r", r.home)
	testutil.Eventually(t, 30*time.Second, "a to refuse r", func() bool {
		_, _, errMsg := a.encFolder("docs").peer(r.ID)
		return strings.Contains(errMsg, "rolled back")
	})
	out, res = checkRun(t, a, "docs")
	if res.code != 4 || len(out.Reports) != 1 || len(out.Reports[0].Problems) != 1 {
		t.Fatalf("check of a log with records withheld: exit %d, %+v, stderr %q", res.code, out, res.stderr)
	}
	if p := out.Reports[0].Problems[0]; p.Kind != check.RolledBack || !strings.Contains(p.Detail, "up to 7") {
		t.Fatalf("withheld records gave %+v; want the rollback", p)
	}
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCheckOnReceiver: a receiver checks its own store with no password,
// through the binary, on a local directory and on a real S3 server: clean
// after a backup; a deleted chunk object and a truncated pack are
// reported (and a trusted device's read-data check finds the loss too).
func TestCheckOnReceiver(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	for _, kind := range []string{"local", "s3"} {
		t.Run(kind, func(t *testing.T) {
			var r *node
			var store blob.Store
			if kind == "local" {
				r = startNode(t, "r")
				st, err := local.Open(filepath.Join(r.home, "blobs"))
				if err != nil {
					t.Fatal(err)
				}
				store = st
			} else {
				cfg := s3test.Start(t)
				t.Setenv("LOCKSTEP_S3_ACCESS_KEY", cfg.AccessKey)
				t.Setenv("LOCKSTEP_S3_SECRET_KEY", cfg.SecretKey)
				r = startNode(t, "r", "--s3-endpoint", cfg.Endpoint, "--s3-bucket", cfg.Bucket, "--s3-insecure")
				st, err := s3.New(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				store = st
			}
			a := startNode(t, "a")
			dirA := filepath.Join(t.TempDir(), "a")
			// 12 MiB: on S3, where chunks below 1 MiB are packed in packs
			// of about 4 MiB, several packs.
			writeFile(t, filepath.Join(dirA, "big.bin"), randomBytes(2, 12<<20), 0o644)
			for i := range 5 {
				writeFile(t, filepath.Join(dirA, "small-"+string(rune('a'+i))), randomBytes(uint64(20+i), 2500), 0o644)
			}
			a.cli("folder", "add", "docs", dirA)
			backUp(t, a, r, "docs", passwordFile(t, "pw"))

			out, res := checkRun(t, r, "docs")
			if res.code != 0 || !out.Clean || len(out.Reports) != 1 || out.Reports[0].Mode != "store" || out.Reports[0].Objects == 0 {
				t.Fatalf("receiver's check of a whole store: exit %d, %+v, stderr %q", res.code, out, res.stderr)
			}
			if out, res := checkRun(t, a, "docs", "--read-data"); res.code != 0 || !out.Clean {
				t.Fatalf("trusted read-data check: exit %d, %+v", res.code, out)
			}

			ctx := context.Background()
			// A loose chunk of big.bin goes missing, or, if there is none (S3
			// packs chunks below 1 MiB), a pack other than the largest, which
			// holds chunks of big.bin too; the largest pack is cut in half.
			var loose, pack string
			var packSize int64
			var packs []string
			err := store.List(ctx, "r/", func(info blob.Info) error {
				switch {
				case strings.Contains(info.Key, "/c/") && loose == "":
					loose = info.Key
				case strings.Contains(info.Key, "/p/"):
					packs = append(packs, info.Key)
					if info.Size > packSize {
						pack, packSize = info.Key, info.Size
					}
				}
				return nil
			})
			if loose == "" && kind == "s3" {
				for _, k := range packs {
					if k != pack {
						loose = k
						break
					}
				}
			}
			if err != nil || loose == "" || pack == "" {
				t.Fatalf("store holds loose chunk or pack %q and pack %q (%v); the test needs both", loose, pack, err)
			}
			if err := store.Delete(ctx, loose); err != nil {
				t.Fatal(err)
			}
			var half []byte
			if err := store.Get(ctx, pack, func(rd io.Reader) error {
				b, err := io.ReadAll(rd)
				half = b[:len(b)/2]
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := store.Put(ctx, pack, bytes.NewReader(half), int64(len(half))); err != nil {
				t.Fatal(err)
			}

			out, res = checkRun(t, r, "docs")
			if res.code != 4 {
				t.Fatalf("receiver's check of a damaged store: exit %d, %+v, stderr %q", res.code, out, res.stderr)
			}
			byObject := map[string]check.Kind{}
			for _, p := range out.Reports[0].Problems {
				byObject[p.Object] = p.Kind
			}
			if byObject[loose] != check.Missing || byObject[pack] != check.Damaged {
				t.Fatalf("problems %+v; want %s missing and %s damaged", out.Reports[0].Problems, loose, pack)
			}
			human := run(t, r.home, "check", "docs")
			if human.code != 4 || !strings.Contains(human.stdout, "1 damaged, 1 missing") {
				t.Fatalf("receiver's check printed %q (exit %d)", human.stdout, human.code)
			}
			out, res = checkRun(t, a, "docs", "--read-data")
			if res.code != 4 || !slices.Contains(problemsOf(out), "missing big.bin") {
				t.Fatalf("trusted read-data check of the damaged store: exit %d, problems %q", res.code, problemsOf(out))
			}

			// What the store was asked, as a bill counts it.
			var st web.Status
			r.get("/rest/status", &st)
			u := st.StoreUsage
			if u == nil || u.Put.Requests == 0 || u.Put.Bytes < 2<<20 || u.Get.Requests == 0 || u.List.Requests == 0 {
				t.Fatalf("the receiver's store usage: %+v", u)
			}
			if out := r.cli("status"); !strings.Contains(out, "store "+st.Store+" since ") || !strings.Contains(out, "PUT ") {
				t.Errorf("status on the receiver does not show its store's requests:\n%s", out)
			}
		})
	}
}

// TestConsoleChecks: in headless Chromium, a folder with a receiver offers
// a check; one run from the page ends clean and is shown with its time,
// a schedule set there is kept, and the section fits a phone. The
// receiver's page checks its own store.
func TestConsoleChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	browser := newBrowser(t)
	d, r := startNode(t, "d"), startNode(t, "r")
	dir := filepath.Join(t.TempDir(), "docs")
	writeFile(t, filepath.Join(dir, "x.txt"), []byte("checked"), 0o644)
	d.cli("folder", "add", "docs", dir)
	backUp(t, d, r, "docs", passwordFile(t, "console check password"))

	cd := openConsole(t, browser, d)
	cd.setUp()
	cd.visit("/folders/docs", "#check-never")
	cd.run("reading all data", chromedp.SetValue(chromedp.CSS("#check-read-data"), "all"))
	cd.submit("checking now", nil, "#check-now", "#flash")
	if cd.flashIsError() {
		t.Fatalf("check now: %q", cd.text("#flash"))
	}
	testutil.Eventually(t, converge, "the page to show the check's result", func() bool {
		cd.visit("/folders/docs", "#checks")
		return cd.count("#check-last.ok") == 1
	})
	if got := cd.text("#check-last"); !strings.Contains(got, ": clean.") {
		t.Errorf("the last check reads %q", got)
	}
	var st web.CheckState
	d.get("/rest/folders/docs/check", &st)
	if st.Last == nil || !st.Last.Clean || st.Last.Reports[0].Mode != "read-data" || st.Last.Reports[0].BytesRead == 0 {
		t.Fatalf("the console's check, as REST sees it: %+v", st.Last)
	}
	cd.submit("scheduling", map[string]string{"#check-every": "7d", "#check-schedule-read-data": "5%"}, "#check-schedule-submit", "#flash")
	if got := cd.text("#flash"); got != "Folder docs is checked every 7d." {
		t.Errorf("scheduling says %q", got)
	}
	if got := strings.TrimSpace(d.cli("folder", "check", "docs")); !strings.Contains(got, "checked every 7d, reading 5% of the data") || !strings.Contains(got, "clean") {
		t.Errorf("folder check after the form: %q", got)
	}
	cd.submit("a bad interval", map[string]string{"#check-every": "sometimes"}, "#check-schedule-submit", "#flash")
	if !cd.flashIsError() {
		t.Errorf("a bad interval is not an error: %q", cd.text("#flash"))
	}
	cd.run("a phone's width", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	if bad := overflowing(cd, "/folders/docs"); len(bad) > 0 {
		t.Errorf("at 390 px the folder page does not fit:\n  %s", strings.Join(bad, "\n  "))
	}

	cr := openConsole(t, browser, r)
	cr.setUp()
	cr.visit("/folders/docs", "#check-never")
	if n := cr.count("#check-read-data, #check-repair"); n != 0 {
		t.Errorf("the receiver offers %d read-data or repair controls it cannot use", n)
	}
	cr.submit("checking the store", nil, "#check-now", "#flash")
	testutil.Eventually(t, converge, "the receiver's page to show its check", func() bool {
		cr.visit("/folders/docs", "#checks")
		return cr.count("#check-last.ok") == 1
	})
	cr.visit("/", "#store-usage-table")
	if got := cr.text(`#store-usage-table tr[data-kind="put"] td[data-label="Requests"]`); got == "" || got == "0" {
		t.Errorf("the receiver's dashboard counts %q PUT requests", got)
	}
}

// droppedRecord is a record dropRecord deleted.
type droppedRecord struct{ counter int64 }

// dropRecord deletes, from a stopped receiver's database, a record of the
// first upload whose file has no newer version: one in the middle of a
// log object, which the receiver does not replay.
func dropRecord(t *testing.T, home string) droppedRecord {
	t.Helper()
	d, err := sql.Open("sqlite3", filepath.Join(home, "lockstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var rec droppedRecord
	var seq int64
	if err := d.QueryRow(`SELECT seq, counter FROM receiver_records r WHERE seq > 1 AND 1 = (SELECT count(*) FROM receiver_records o WHERE o.file_key = r.file_key) ORDER BY seq LIMIT 1`).Scan(&seq, &rec.counter); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(`DELETE FROM receiver_records WHERE seq = ?`, seq); err != nil {
		t.Fatal(err)
	}
	return rec
}

// hexID is the node's device ID in the hex form version IDs use.
func (n *node) hexID(t *testing.T) string {
	t.Helper()
	id, err := crypt.ParseDeviceID(n.ID)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(id[:])
}
