package test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lockstep/test/testutil"
)

// TestRecoverRefusesWithheldRecords: a receiver that drops a record from
// the middle of its log and withholds the newest version of a file is
// found out by the uploader's checkpoint: recover refuses and writes
// nothing, says what is missing, and with --accept-incomplete writes what
// the receiver holds and still exits non-zero. A complete log recovers
// with the time of the state it proves.
func TestRecoverRefusesWithheldRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	a, r := startNode(t, "a"), startNode(t, "r")
	dirA := filepath.Join(t.TempDir(), "a")
	for i := range 8 {
		writeFile(t, filepath.Join(dirA, "file-"+string(rune('a'+i))), randomBytes(uint64(100+i), 2000+i*300), 0o644)
	}
	a.cli("folder", "add", "docs", dirA)
	holdFolder(t, r, "docs", a)
	pw := passwordFile(t, "pw")
	backUpTo(t, a, r, "docs", pw)
	waitBackedUp(t, a, r, "docs")
	before := r.encFolder("docs").Receiver.Records

	// A second version of file-d: the last record of the log.
	writeFile(t, filepath.Join(dirA, "file-d"), []byte("the newest version of file-d\n"), 0o644)
	a.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to store file-d's new version", func() bool {
		st := r.encFolder("docs")
		return st.Receiver != nil && st.Receiver.Records > before
	})
	waitBackedUp(t, a, r, "docs")

	clean := filepath.Join(t.TempDir(), "clean")
	res := run(t, newDeviceFor(t, r, "docs"), recoverArgs(r, "docs", pw, clean)...)
	if res.code != 0 || !strings.Contains(res.stdout, "as of ") {
		t.Fatalf("recover of a complete log: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if d := diffTrees(snapshot(t, dirA), snapshot(t, clean)); d != "" {
		t.Fatalf("recovered tree differs: %s", d)
	}

	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	withholdRecords(t, r.home)
	r = startNodeIn(t, "r", r.home)

	home := newDeviceFor(t, r, "docs")
	dst := filepath.Join(t.TempDir(), "withheld")
	res = run(t, home, recoverArgs(r, "docs", pw, dst)...)
	if res.code != 4 || !strings.Contains(res.stderr, "missing records") {
		t.Fatalf("recover of a log with records withheld: exit %d, stderr %q", res.code, res.stderr)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatalf("recover that refused left %s behind (%v)", dst, err)
	}

	res = run(t, home, append(recoverArgs(r, "docs", pw, dst), "--accept-incomplete")...)
	if res.code != 4 {
		t.Fatalf("recover --accept-incomplete exited %d, want 4; stderr %q", res.code, res.stderr)
	}
	got := snapshot(t, dst)
	if len(got) != 7 {
		t.Errorf("recover --accept-incomplete wrote %d entries, want the 7 files the receiver still holds: %v", len(got), got)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "file-d")); err == nil && string(b) == "the newest version of file-d\n" {
		t.Error("file-d came back at its withheld newest version")
	}
}

// withholdRecords deletes, in a stopped receiver's database, the newest
// record of its log and one from the middle of the first upload, and the
// newest record's log object from its store (which the receiver would
// replay into the database at start).
func withholdRecords(t testing.TB, home string) {
	t.Helper()
	d, err := sql.Open("sqlite3", filepath.Join(home, "lockstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var last, n int64
	if err := d.QueryRow(`SELECT max(seq), count(*) FROM receiver_records`).Scan(&last, &n); err != nil {
		t.Fatal(err)
	}
	res, err := d.Exec(`DELETE FROM receiver_records WHERE seq = ? OR seq = (SELECT seq FROM receiver_records ORDER BY seq LIMIT 1 OFFSET ?)`, last, n/2)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := res.RowsAffected(); k != 2 {
		t.Fatalf("deleted %d records, want 2", k)
	}
	objs, err := filepath.Glob(filepath.Join(home, "blobs", "r", "*", "log", "00", fmt.Sprintf("%016x", last)))
	if err != nil || len(objs) != 1 {
		t.Fatalf("the log object of record %d: %v %v", last, objs, err)
	}
	if err := os.Remove(objs[0]); err != nil {
		t.Fatal(err)
	}
}
