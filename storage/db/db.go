// Package db is a node's SQLite database (lockstep.db in its home): the
// schema, its migrations and typed queries for settings, devices, folders,
// their shares, pending offers, file records; on a trusted device each
// folder's key, index ID, chunking polynomial and versioning policy, each
// peer's announced index ID and what it knows of each receiver's log; and
// on a receiver the sealed records, chunk list, log ID and envelope of each
// encrypted folder.
//
// Invariants:
//
//   - One process at a time. Open takes an exclusive flock(2) on
//     "<path>.lock" (which holds the owner's pid) before it touches the
//     database, and holds it until Close. A second Open, from this or any
//     other process, fails with ErrLocked. The kernel drops the lock when its
//     holder dies, so a crash never leaves a stale lock behind.
//   - WAL journal, foreign keys on, busy_timeout set, synchronous=NORMAL. In
//     WAL mode NORMAL never corrupts the database: a power loss (not a process
//     crash) can lose the last transactions committed before it, and the
//     database reopens consistent at an earlier commit.
//   - The schema is created and upgraded only by the ordered migrations
//     embedded from migrations/NNNN_name.sql. Each one runs in its own
//     transaction together with the bump of PRAGMA user_version, so a failed
//     migration leaves the database at the previous version. A database whose
//     user_version is newer than the newest migration is refused with
//     ErrSchemaTooNew before any migration runs.
//   - Every write is one transaction (BEGIN IMMEDIATE, so a writer never has
//     to upgrade a read lock and hit SQLITE_BUSY), and writers of one DB are
//     serialised in Go. Reads are single statements, each consistent in
//     itself, and run concurrently with each other and with the one writer.
//   - Times are stored as UTC unix nanoseconds; the zero time.Time is stored
//     as 0 and read back as the zero time.Time. Times read back are in UTC.
//     File modification times are the exception: stored exactly, 0 is 1970.
//   - File records of this node are stored under LocalDevice (""); records
//     learnt from a peer under its canonical device ID.
//
// A DB is safe for concurrent use. It starts no goroutines of its own
// (database/sql keeps one connection opener per DB until Close).
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"runtime"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

var (
	// ErrNotFound means the requested row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrLocked means another process (or another DB in this process) has
	// the database open.
	ErrLocked = errors.New("database is in use by another lockstep process")
	// ErrSchemaTooNew means the database was written by a newer lockstep
	// whose schema this binary does not know.
	ErrSchemaTooNew = errors.New("database schema is newer than this lockstep supports")
	// ErrConstraint means a write broke a rule of the schema: an unknown
	// folder type, a share for an unknown device, an empty ID, ...
	ErrConstraint = errors.New("constraint failed")
)

// busyTimeout is how long a statement waits for a lock held by another
// connection before it fails with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// DB is an open lockstep database. Create it with Open and release it with
// Close.
type DB struct {
	sql   *sql.DB
	lock  *fileLock
	write chan struct{} // a one-slot semaphore held by the running writer

	closeOnce sync.Once
	closeErr  error
}

// Open opens the database at path, creating it (mode 0600) if missing,
// applies pending migrations and returns it. It fails with ErrLocked if the database is open
// elsewhere and with ErrSchemaTooNew if it was written by a newer lockstep.
func Open(path string) (*DB, error) {
	return openWith(context.Background(), path, embeddedMigrations)
}

// openWith is Open with the directory of migrations to apply (NNNN_name.sql
// files); tests pass their own.
func openWith(ctx context.Context, path string, fsys fs.FS) (_ *DB, err error) {
	migs, err := loadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	lock, err := acquireLock(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			lock.release()
		}
	}()

	// Create the file ourselves so it is private; SQLite gives its -wal and
	// -shm files the same permissions.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	f.Close()

	sqlDB, err := sql.Open("sqlite3", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	// WAL readers run in parallel, so allow about one connection per core;
	// the single writer borrows one of them. Idle connections are kept:
	// each holds its page cache and prepared statements.
	n := max(4, runtime.GOMAXPROCS(0))
	sqlDB.SetMaxOpenConns(n)
	sqlDB.SetMaxIdleConns(n)
	sqlDB.SetConnMaxLifetime(0)
	sqlDB.SetConnMaxIdleTime(0)

	db := &DB{sql: sqlDB, lock: lock, write: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			sqlDB.Close()
		}
	}()
	if err := db.checkJournal(ctx); err != nil {
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	if err := db.migrate(ctx, migs); err != nil {
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	return db, nil
}

// dsn builds the go-sqlite3 data source name for path. A file: URI keeps
// '?', '#' and '%' in the path from being read as URI syntax.
func dsn(path string) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_txlock", "immediate")
	q.Set("_stmt_cache_size", "32")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// checkJournal confirms that the connection really runs in WAL mode; some
// file systems (network mounts) cannot provide it.
func (db *DB) checkJournal(ctx context.Context) error {
	var mode string
	if err := db.sql.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("reading journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal mode is %q, want wal (is the file system local?)", mode)
	}
	return nil
}

// Close closes the database and then releases the lock. Callers stop using
// db first. Further calls do nothing and return the first call's result.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.closeErr = db.sql.Close()
		if err := db.lock.release(); db.closeErr == nil {
			db.closeErr = err
		}
	})
	return db.closeErr
}

// update runs fn in one write transaction and commits it if fn returns nil.
// Writers are serialised; waiting for the turn honours ctx. Constraint
// violations reported by SQLite are wrapped in ErrConstraint.
func (db *DB) update(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := db.writeTurn(ctx); err != nil {
		return err
	}
	defer db.endWrite()

	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	// fn's statements get a context that does not end: given one that
	// can, the driver runs each statement in a goroutine of its own
	// (100,000 of them to store a large pull's records). The transaction
	// keeps ctx: when it ends, it is rolled back, and fn's next statement
	// fails.
	if err := fn(context.WithoutCancel(ctx), tx); err != nil {
		tx.Rollback()
		return constraintError(err)
	}
	if err := tx.Commit(); err != nil {
		return constraintError(fmt.Errorf("committing: %w", err))
	}
	return nil
}

// writeTurn waits until no other write transaction runs, or ctx ends;
// the writer calls endWrite once its transaction is over.
func (db *DB) writeTurn(ctx context.Context) error {
	select {
	case db.write <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// endWrite ends the turn writeTurn gave.
func (db *DB) endWrite() { <-db.write }

// constraintError adds ErrConstraint to err when SQLite refused a write for
// breaking a rule of the schema.
func constraintError(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && se.Code == sqlite3.ErrConstraint && !errors.Is(err, ErrConstraint) {
		return fmt.Errorf("%w: %w", ErrConstraint, err)
	}
	return err
}

// nanos encodes t for storage: UTC unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos decodes a stored time: 0 is the zero time, others are UTC.
func fromNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// boolInt encodes b as the INTEGER 0 or 1 the schema stores.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mustAffect returns ErrNotFound when res changed no row.
func mustAffect(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
