package db

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// testMigrations returns the first n of a small chain of migrations.
func testMigrations(n int) fstest.MapFS {
	all := []struct{ name, sql string }{
		{"0001_a.sql", "CREATE TABLE a (x INTEGER PRIMARY KEY);"},
		{"0002_b.sql", "CREATE TABLE b (y INTEGER REFERENCES a (x));\nINSERT INTO a VALUES (1);"},
		{"0003_c.sql", "INSERT INTO a VALUES (2); INSERT INTO a VALUES (3);"},
	}
	fsys := fstest.MapFS{}
	for _, m := range all[:n] {
		fsys[m.name] = &fstest.MapFile{Data: []byte(m.sql)}
	}
	return fsys
}

func openMigrations(t *testing.T, path string, fsys fstest.MapFS) (*DB, error) {
	t.Helper()
	return openWith(context.Background(), path, fsys)
}

func countRows(t *testing.T, db *DB, table string) int {
	t.Helper()
	var n int
	if err := db.sql.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestMigrateVersionBoundaries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")

	// Fresh database: all of 1..2 applied.
	db, err := openMigrations(t, path, testMigrations(2))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := db.schemaVersion(ctx); v != 2 {
		t.Fatalf("version %d, want 2", v)
	}
	db.Close()

	// Database at n-1 with a binary that knows n: applies only migration 3.
	db, err = openMigrations(t, path, testMigrations(3))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := db.schemaVersion(ctx); v != 3 {
		t.Fatalf("version %d, want 3", v)
	}
	if n := countRows(t, db, "a"); n != 3 {
		t.Fatalf("table a has %d rows after upgrade, want 3", n)
	}
	db.Close()

	// Database at n: nothing to apply (re-running 3 would add rows).
	db, err = openMigrations(t, path, testMigrations(3))
	if err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, "a"); n != 3 {
		t.Fatalf("table a has %d rows after a no-op open, want 3", n)
	}
	db.Close()

	// Database at n+1 for the binary: refused, untouched.
	_, err = openMigrations(t, path, testMigrations(2))
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("open by an older binary: %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "schema version 3") || !strings.Contains(err.Error(), "up to 2") {
		t.Errorf("error %q does not name both versions", err)
	}
	// The failed open released the lock and changed nothing.
	db, err = openMigrations(t, path, testMigrations(3))
	if err != nil {
		t.Fatalf("open after refusal: %v", err)
	}
	defer db.Close()
	if v, _ := db.schemaVersion(ctx); v != 3 {
		t.Fatalf("version %d after refusal, want 3", v)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lockstep.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	known, err := db.schemaVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	// Pretend a newer lockstep migrated it.
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("PRAGMA user_version = " + strconv.Itoa(known+1)); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	for range 2 { // twice: the first refusal must release the lock
		_, err = Open(path)
		if !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("Open: %v, want ErrSchemaTooNew", err)
		}
	}
	t.Log(err)
}

func TestMigrationFailureRollsBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	fsys := testMigrations(1)
	fsys["0002_bad.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE c (z INTEGER);\nINSERT INTO nope VALUES (1);")}
	_, err := openMigrations(t, path, fsys)
	if err == nil || !strings.Contains(err.Error(), "0002_bad.sql") {
		t.Fatalf("open with a broken migration: %v, want an error naming it", err)
	}

	db, err := openMigrations(t, path, testMigrations(1))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.schemaVersion(ctx); v != 1 {
		t.Fatalf("version %d after a failed migration, want 1", v)
	}
	var n int
	db.sql.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name = 'c'").Scan(&n)
	if n != 0 {
		t.Fatal("the failed migration's table c exists")
	}
}

func TestMigrationForeignKeyCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	fsys := testMigrations(1)
	fsys["0002_orphan.sql"] = &fstest.MapFile{Data: []byte(`
		CREATE TABLE p (id INTEGER PRIMARY KEY);
		CREATE TABLE ch (pid INTEGER REFERENCES p (id));
		PRAGMA defer_foreign_keys = ON;
		INSERT INTO ch VALUES (7);`)}
	_, err := openMigrations(t, path, fsys)
	if !errors.Is(err, ErrConstraint) {
		t.Fatalf("migration leaving an orphan: %v, want ErrConstraint", err)
	}
}

func TestLoadMigrations(t *testing.T) {
	migs, err := loadMigrations(embeddedMigrations)
	if err != nil {
		t.Fatalf("embedded migrations: %v", err)
	}
	for i, m := range migs {
		if m.version != i+1 || strings.TrimSpace(m.sql) == "" {
			t.Errorf("embedded migration %d: %+v", i, m)
		}
	}

	bad := map[string][]string{
		"gap":       {"0001_a.sql", "0003_c.sql"},
		"duplicate": {"0001_a.sql", "0001_b.sql"},
		"unpadded":  {"1_a.sql", "2_b.sql", "3_c.sql", "4_d.sql", "5_e.sql", "6_f.sql", "7_g.sql", "8_h.sql", "9_i.sql", "10_j.sql"},
		"no number": {"init.sql"},
		"not a num": {"x_init.sql"},
		"zero":      {"0000_a.sql"},
		"signed":    {"+1_a.sql"},
		"no start":  {"0002_b.sql"},
	}
	for name, files := range bad {
		fsys := fstest.MapFS{}
		for _, f := range files {
			fsys[f] = &fstest.MapFile{Data: []byte("SELECT 1;")}
		}
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loadMigrations(%v) succeeded", name, files)
		}
	}

	// Non-.sql files are ignored; an empty directory is version 0.
	migs, err = loadMigrations(fstest.MapFS{"README": &fstest.MapFile{}})
	if err != nil || len(migs) != 0 {
		t.Errorf("no migrations: %v, %v", migs, err)
	}
}
