package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openTest opens a fresh database in a temporary directory and closes it
// when the test ends.
func openTest(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lockstep.db")
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db, path
}

// at is a fixed time with nanoseconds, in a zone other than UTC so tests
// see that stored times come back in UTC.
func at(sec int) time.Time {
	return time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("X", 3600)).Add(time.Duration(sec) * time.Second)
}

func TestOpenSetsPragmas(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	// Check several connections: the settings are per connection.
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		c, err := db.sql.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		for pragma, want := range map[string]string{
			"journal_mode": "wal",
			"foreign_keys": "1",
			"synchronous":  "1", // NORMAL
			"busy_timeout": fmt.Sprint(busyTimeout.Milliseconds()),
		} {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatalf("conn %d: PRAGMA %s: %v", i, pragma, err)
			}
			if got != want {
				t.Errorf("conn %d: PRAGMA %s = %s, want %s", i, pragma, got, want)
			}
		}
	}
}

func TestOpenAppliesMigrationsOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lockstep.db")
	migs, err := loadMigrations(embeddedMigrations)
	if err != nil {
		t.Fatal(err)
	}
	if len(migs) == 0 {
		t.Fatal("no embedded migrations")
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := db.schemaVersion(ctx); err != nil || v != len(migs) {
		t.Fatalf("schema version = %d, %v; want %d", v, err, len(migs))
	}
	if err := db.SetSetting(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// A re-open must not re-run migration 1: it would fail on CREATE TABLE
	// or, worse, lose the setting.
	db, err = Open(path)
	if err != nil {
		t.Fatalf("re-open: %v", err)
	}
	defer db.Close()
	if v, err := db.schemaVersion(ctx); err != nil || v != len(migs) {
		t.Fatalf("schema version after re-open = %d, %v; want %d", v, err, len(migs))
	}
	if got, err := db.Setting(ctx, "k"); err != nil || got != "v" {
		t.Fatalf("setting after re-open = %q, %v", got, err)
	}
}

func TestOpenPathWithURISyntax(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a dir?x=1#frag%20")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lock?step.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetSetting(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The database must be exactly at path, not at a truncated name.
	for _, p := range []string{path, path + ".lock"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("stat: %v", err)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "lock?step.db" && e.Name() != "lock?step.db.lock" &&
			e.Name() != "lock?step.db-wal" && e.Name() != "lock?step.db-shm" {
			t.Errorf("unexpected file %q beside the database", e.Name())
		}
	}
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, err := db.Setting(ctx, "k"); err != nil || got != "v" {
		t.Fatalf("setting after re-open = %q, %v", got, err)
	}
}

func TestOpenTwiceInProcessIsLocked(t *testing.T) {
	_, path := openTest(t)
	_, err := Open(path)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	want := fmt.Sprintf("(pid %d, this process)", os.Getpid())
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not mention %q", err, want)
	}
}

func TestCloseReleasesLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lockstep.db")
	for i := range 3 {
		db, err := Open(path)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	b, err := os.ReadFile(path + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 0 {
		t.Errorf("lock file holds %q after Close, want it empty", b)
	}
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	db, path := openTest(t)
	must(t, db.SetSetting(context.Background(), "k", "v"))
	for _, p := range []string{path, path + "-wal", path + ".lock"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(p), mode)
		}
	}
	// Close twice: the second call is a no-op.
	must(t, db.Close())
	must(t, db.Close())
}

func TestOpenRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lockstep.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the first failure must release the lock
		_, err := Open(path)
		if err == nil || errors.Is(err, ErrLocked) {
			t.Fatalf("Open of a garbage file: %v, want an error other than ErrLocked", err)
		}
	}
}

func TestOpenFailsOnUnusableDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "lockstep.db")
	if _, err := Open(path); err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
}

func TestReadersRunDuringWrite(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	if err := db.PutDevice(ctx, Device{ID: "OLD"}); err != nil {
		t.Fatal(err)
	}
	const readers = 8
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO devices (id, added_at) VALUES ('NEW', 1)`); err != nil {
			return err
		}
		// The write transaction is open and holds SQLite's write lock.
		// Readers on other connections must neither block nor see NEW.
		var wg sync.WaitGroup
		errs := make(chan error, readers)
		for range readers {
			wg.Go(func() {
				ds, err := db.Devices(ctx)
				if err != nil {
					errs <- err
					return
				}
				if len(ds) != 1 || ds[0].ID != "OLD" {
					errs <- fmt.Errorf("reader saw %v during the write", ds)
					return
				}
				if _, err := db.Device(ctx, "NEW"); !errors.Is(err, ErrNotFound) {
					errs <- fmt.Errorf("uncommitted device: %v, want ErrNotFound", err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Device(ctx, "NEW"); err != nil {
		t.Fatalf("committed device: %v", err)
	}
}

func TestConcurrentWritersAndReaders(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			if err := db.PutDevice(ctx, Device{ID: fmt.Sprintf("D%03d", i)}); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			if _, err := db.Devices(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ds, err := db.Devices(ctx)
	if err != nil || len(ds) != n {
		t.Fatalf("Devices: %d, %v; want %d", len(ds), err, n)
	}
}

func TestUpdateRollsBackOnError(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('a', 'b')`); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update: %v, want boom", err)
	}
	if _, err := db.Setting(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("setting after rollback: %v, want ErrNotFound", err)
	}
}

func TestUpdateWaitHonoursContext(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- db.update(ctx, func(context.Context, *sql.Tx) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.SetSetting(cctx, "k", "v"); !errors.Is(err, context.Canceled) {
		t.Errorf("write while another runs, cancelled: %v, want context.Canceled", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestConstraintFromSQLite(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	// Bypass the Go-side checks to see that the schema's own CHECK and
	// FOREIGN KEY constraints hold and are reported as ErrConstraint.
	for _, stmt := range []string{
		`INSERT INTO folders (id, path, type, created_at) VALUES ('f', '/x', 'bogus', 1)`,
		`INSERT INTO folder_shares (folder_id, device_id) VALUES ('nope', 'nope')`,
		`INSERT INTO devices (id, addresses, added_at) VALUES ('d', '{"a":1}', 1)`,
		`INSERT INTO devices (id, untrusted, added_at) VALUES ('d', 2, 1)`,
		`INSERT INTO devices (id, added_at) VALUES ('d', 'not a number')`,
	} {
		err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, stmt)
			return err
		})
		if !errors.Is(err, ErrConstraint) {
			t.Errorf("%s: %v, want ErrConstraint", stmt, err)
		}
	}
}

func TestNanos(t *testing.T) {
	for _, tm := range []time.Time{{}, at(0), time.Unix(0, 1), time.Unix(-1, 0)} {
		got := fromNanos(nanos(tm))
		if !got.Equal(tm) {
			t.Errorf("fromNanos(nanos(%v)) = %v", tm, got)
		}
		if !tm.IsZero() && got.Location() != time.UTC {
			t.Errorf("fromNanos(%v) is in %v, want UTC", tm, got.Location())
		}
	}
}

// TestUpdateCanceledRollsBack: statements inside a transaction run without
// the caller's cancellation (the driver would start a goroutine for each),
// but the transaction keeps it: cancelled midway, nothing is committed.
func TestUpdateCanceledRollsBack(t *testing.T) {
	db, _ := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	err := db.update(ctx, func(inner context.Context, tx *sql.Tx) error {
		if inner.Done() != nil {
			t.Error("statements got a context that can end")
		}
		if _, err := tx.ExecContext(inner, `INSERT INTO settings (key, value) VALUES ('a', 'b')`); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) && !errors.Is(err, sql.ErrTxDone) {
		t.Fatalf("update cancelled midway: %v, want it cancelled", err)
	}
	if _, err := db.Setting(context.Background(), "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("setting of a cancelled update: %v, want ErrNotFound", err)
	}
}
