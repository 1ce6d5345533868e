package db

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// embeddedMigrations is the migrations directory compiled into the binary.
var embeddedMigrations = mustSub(migrationFiles, "migrations")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // dir is a constant embedded directory
	}
	return sub
}

// migration is one schema step: applying it takes the database from
// version-1 to version.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads every *.sql file of fsys, ordered by the number
// before the first '_' of its name. The numbers must run 1, 2, 3, ...
// without gaps or duplicates.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("listing migrations: %w", err)
	}
	migs := make([]migration, 0, len(names))
	for _, name := range names {
		v, err := migrationVersion(name)
		if err != nil {
			return nil, err
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", name, err)
		}
		migs = append(migs, migration{version: v, name: name, sql: string(b)})
	}
	// Glob returns names sorted; equal-width numbers therefore sort by
	// version, and the check below catches any other ordering.
	for i, m := range migs {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d (gap, duplicate or unpadded number)", m.name, m.version, i+1)
		}
	}
	return migs, nil
}

// migrationVersion parses the version from a name like "0001_init.sql".
func migrationVersion(name string) (int, error) {
	num, _, ok := strings.Cut(strings.TrimSuffix(path.Base(name), ".sql"), "_")
	if !ok || num == "" {
		return 0, fmt.Errorf("migration %s: name is not NNNN_description.sql", name)
	}
	v, err := strconv.Atoi(num)
	if err != nil || v <= 0 || strings.HasPrefix(num, "+") {
		return 0, fmt.Errorf("migration %s: %q is not a positive version number", name, num)
	}
	return v, nil
}

// migrate brings the schema up to the last of migs. It refuses, without
// writing, a database that is already past it.
func (db *DB) migrate(ctx context.Context, migs []migration) error {
	cur, err := db.schemaVersion(ctx)
	if err != nil {
		return err
	}
	if cur > len(migs) {
		return fmt.Errorf("%w: the database is at schema version %d, this lockstep knows up to %d; run a newer lockstep", ErrSchemaTooNew, cur, len(migs))
	}
	for _, m := range migs[cur:] {
		err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			if err := foreignKeyCheck(ctx, tx); err != nil {
				return err
			}
			// PRAGMA takes no bound parameters; m.version is an int.
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version))
			return err
		})
		if err != nil {
			return fmt.Errorf("applying migration %s: %w", m.name, err)
		}
	}
	return nil
}

// schemaVersion returns the database's PRAGMA user_version: the number of
// migrations applied to it.
func (db *DB) schemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := db.sql.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	return v, nil
}

// foreignKeyCheck fails if any row breaks a foreign key, which a migration
// that rebuilds a table could otherwise leave behind unnoticed.
func foreignKeyCheck(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return err
	}
	defer rows.Close()
	if rows.Next() {
		var table string
		var rowid sql.NullInt64
		var parent string
		var fkid int
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return err
		}
		return fmt.Errorf("%w: row %d of %s refers to a missing row of %s", ErrConstraint, rowid.Int64, table, parent)
	}
	return rows.Err()
}
