package test

import (
	"lockstep/test/testutil"

	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

// The frozen homes of testdata/home-v7, made by the release before
// migration 0008; its README says how.
const (
	v7Fixture  = "testdata/home-v7"
	v7DeviceA  = "ZJHPFB7-VWBYTK6-XN7WBEY-K4IZTE6-UVQZSG7-MVOYT63-64YLPAJ-QJSSOAG"
	v7DeviceR  = "LQDTMK3-5ADMML7-ZNXTQMQ-W37XEOD-5Y35BK3-OAAVV4U-EPFFUT6-5MZZCA7"
	v7Password = "upgrade-fixture-v7 correct horse"
	// v7Records is what R held of docs: 4 files and the directory sub.
	v7Records = 5
)

// v7ModTime is the mtime of every file and directory of the fixture's
// folder, which git does not keep.
var v7ModTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// copyFixture copies the fixture tree from into to, giving directories
// dirMode and files fileMode (git keeps neither exactly) and every entry
// v7ModTime.
func copyFixture(t testing.TB, from, to string, dirMode, fileMode fs.FileMode) {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			dirs = append(dirs, target)
			if err := os.MkdirAll(target, dirMode); err != nil {
				return err
			}
			return os.Chmod(target, dirMode)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, data, fileMode); err != nil {
			return err
		}
		if err := os.Chmod(target, fileMode); err != nil {
			return err
		}
		return os.Chtimes(target, v7ModTime, v7ModTime)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Children first: writing into a directory changes its mtime.
	for _, d := range slices.Backward(dirs) {
		if err := os.Chtimes(d, v7ModTime, v7ModTime); err != nil {
			t.Fatal(err)
		}
	}
}

// openSQL opens a node's database file with plain SQL. The upgrade test
// writes a home's database this way, with the frozen schema 7's own
// tables, not through storage/db: db.Open would run the migrations in the
// test, and the point is that the daemon under test runs them.
func openSQL(t testing.TB, path string) *sql.DB {
	t.Helper()
	sqlDB, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	return sqlDB
}

// schemaVersion is the user_version of the database at path.
func schemaVersion(t testing.TB, path string) int {
	t.Helper()
	sqlDB := openSQL(t, path)
	defer sqlDB.Close()
	var v int
	if err := sqlDB.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// moveV7Home points a copied schema-7 home at this machine, as a user
// moving it would: folder docs at folderPath, and device peer at address.
func moveV7Home(t testing.TB, home, folderPath, peer, address string) {
	t.Helper()
	path := filepath.Join(home, "lockstep.db")
	if v := schemaVersion(t, path); v != 7 {
		t.Fatalf("%s: schema version %d, want the fixture's 7", path, v)
	}
	sqlDB := openSQL(t, path)
	defer sqlDB.Close()
	for _, u := range []struct {
		query string
		args  []any
	}{
		{"UPDATE folders SET path = ? WHERE id = 'docs'", []any{folderPath}},
		{"UPDATE devices SET addresses = json_array(?) WHERE id = ?", []any{address, peer}},
	} {
		res, err := sqlDB.Exec(u.query, u.args...)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			t.Fatalf("%s: %q changed %d rows (%v), want 1", path, u.query, n, err)
		}
	}
}

// TestUpgradeFromV7Home: a trusted device and its receiver whose homes
// were made before migration 0008 start with the current binary, which
// migrates them; the trusted device still has its folder key and
// versioning policy: a new file reaches the receiver sealed under the old
// key, a brand-new device recovers the whole folder from the receiver
// with the old password, and a wrong password recovers nothing.
func TestUpgradeFromV7Home(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	root := t.TempDir()
	aHome, rHome := filepath.Join(root, "a"), filepath.Join(root, "r")
	dir, rDir := filepath.Join(root, "docs"), filepath.Join(root, "r-docs")
	pristine := filepath.Join(root, "docs-v7")
	copyFixture(t, filepath.Join(v7Fixture, "a"), aHome, 0o700, 0o600)
	copyFixture(t, filepath.Join(v7Fixture, "r"), rHome, 0o700, 0o600)
	copyFixture(t, filepath.Join(v7Fixture, "docs"), dir, 0o755, 0o644)
	copyFixture(t, filepath.Join(v7Fixture, "docs"), pristine, 0o755, 0o644)

	// R first, so that A's address for it is known; R learns A's through
	// its CLI once A listens.
	moveV7Home(t, rHome, rDir, v7DeviceA, deadAddress)
	r := startNodeIn(t, "r", rHome)
	if r.ID != v7DeviceR {
		t.Fatalf("r started as %s, want the fixture's %s", r.ID, v7DeviceR)
	}
	before := r.encFolder("docs")
	if before.Receiver == nil || before.Receiver.Records != v7Records || before.Receiver.Files != v7Records {
		t.Fatalf("r holds %+v of docs, want the fixture's %d records and files", before.Receiver, v7Records)
	}
	moveV7Home(t, aHome, dir, v7DeviceR, r.Listen)
	a := startNodeIn(t, "a", aHome)
	if a.ID != v7DeviceA {
		t.Fatalf("a started as %s, want the fixture's %s", a.ID, v7DeviceA)
	}
	r.cli("device", "add", a.ID, "--name", "a", "--address", a.Listen)

	// A reconnects to R and sees it complete, without an error.
	testutil.Eventually(t, converge, "a connected to r", func() bool { return a.connectedTo(r.ID) })
	testutil.Eventually(t, converge, "r complete for a", func() bool {
		c, connected, _ := a.encFolder("docs").peer(r.ID)
		return connected && c == 100
	})
	if f := a.encFolder("docs"); f.Error != "" {
		t.Fatalf("a's docs: %s", f.Error)
	}
	if _, _, e := a.encFolder("docs").peer(r.ID); e != "" {
		t.Fatalf("a reports r: %s", e)
	}
	// R's copy of a file made before the upgrade opens with the folder key.
	if vs := a.versions("docs", "readme.txt"); !slices.ContainsFunc(vs, func(v versionJSON) bool {
		return v.Source == r.ID && v.Size == 42
	}) {
		t.Fatalf("versions of readme.txt on a: %+v, want r's", vs)
	}

	// A new file: sealed under the old key, stored once on R, listed by A
	// as R's version. The rename makes its one scanned state complete.
	newFile := []byte("written after the upgrade\n")
	tmp := filepath.Join(root, "after-upgrade.txt")
	writeFile(t, tmp, newFile, 0o644)
	if err := os.Rename(tmp, filepath.Join(dir, "after-upgrade.txt")); err != nil {
		t.Fatal(err)
	}
	a.cli("scan", "docs")
	testutil.Eventually(t, converge, "r to store the new file", func() bool {
		st := r.encFolder("docs").Receiver
		return st != nil && st.Records > before.Receiver.Records && st.Files > before.Receiver.Files
	})
	testutil.Eventually(t, converge, "a to list r's version of the new file", func() bool {
		for _, v := range a.versions("docs", "after-upgrade.txt") {
			if v.Source == r.ID && v.Size == int64(len(newFile)) {
				return true
			}
		}
		return false
	})
	waitBackedUp(t, a, r, "docs")
	// Sealed under the old key, the old files are the same files to R (it
	// groups versions by a keyed hash of the path) and their data the same
	// chunks (keyed IDs): R gained one file and one chunk. The copy gave
	// every file a new inode, so A may send their records again, alike.
	st := r.encFolder("docs").Receiver
	t.Logf("r holds %d records of %d files in %d chunks (the fixture: %d, %d, %d)", st.Records, st.Files, st.Chunks,
		before.Receiver.Records, before.Receiver.Files, before.Receiver.Chunks)
	if st.Files != before.Receiver.Files+1 || st.Chunks != before.Receiver.Chunks+1 {
		t.Fatalf("r holds %d files in %d chunks, want %d in %d", st.Files, st.Chunks, before.Receiver.Files+1, before.Receiver.Chunks+1)
	}

	// The versioning policy survived.
	var policy struct {
		Type string `json:"type"`
		Keep int    `json:"keep"`
		Days int    `json:"days"`
	}
	a.get("/rest/folders/docs/versioning", &policy)
	if policy.Type != "simple" || policy.Keep != 3 || policy.Days != 0 {
		t.Fatalf("a's versioning of docs: %+v, want simple, keep 3", policy)
	}
	if out := a.cli("folder", "versioning", "docs"); !strings.Contains(out, "simple") || !strings.Contains(out, "keep 3") {
		t.Fatalf("folder versioning docs: %q", out)
	}

	// A's folder is the fixture's and the new file: nothing was rewritten.
	want := snapshot(t, pristine)
	want["after-upgrade.txt"] = snapshot(t, dir)["after-upgrade.txt"]
	if d := diffTrees(want, snapshot(t, dir)); d != "" {
		t.Fatalf("a's folder changed:\n%s", d)
	}

	// A new device C: a wrong password recovers nothing.
	cHome := newDeviceFor(t, r, "docs")
	dst := filepath.Join(root, "recovered")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, cHome, recoverArgs(r, "docs", passwordFile(t, "not the v7 password"), dst)...)
	if res.code == 0 {
		t.Fatal("recover with a wrong password succeeded")
	}
	assertOneLineError(t, res)
	if ents, err := os.ReadDir(dst); err != nil || len(ents) != 0 {
		t.Fatalf("recover with a wrong password left %d entries in %s (%v)", len(ents), dst, err)
	}

	// With the fixture's password C recovers A's folder exactly.
	mustRun(t, cHome, recoverArgs(r, "docs", passwordFile(t, v7Password), dst)...)
	if got, err := os.ReadFile(filepath.Join(dst, "after-upgrade.txt")); err != nil || string(got) != string(newFile) {
		t.Fatalf("recovered after-upgrade.txt: %q, %v", got, err)
	}
	if d := diffTrees(snapshot(t, dir), snapshot(t, dst)); d != "" {
		t.Fatalf("recovered tree differs from a's folder:\n%s", d)
	}

	// The daemons, not this test, migrated the databases.
	for _, n := range []*node{a, r} {
		if err := n.stop(); err != nil {
			t.Fatalf("stopping %s: %v", n.name, err)
		}
		if v := schemaVersion(t, filepath.Join(n.home, "lockstep.db")); v < 8 {
			t.Fatalf("%s's database is at schema %d after serve, want 8 or later", n.name, v)
		}
	}
}
