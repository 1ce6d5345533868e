package db

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"

	"github.com/mattn/go-sqlite3"
)

// rawConn is a write transaction on one of the pool's SQLite connections,
// bypassing database/sql for statements run many times over: storing
// 100,000 records through database/sql converted and copied every
// argument of every statement (an eighth of a syncing node's
// allocations). The driver keeps the statements prepared (its cache).
type rawConn struct {
	c    *sqlite3.SQLiteConn
	args []driver.NamedValue // reused by exec
}

// exec runs query with args, which it may keep until the next call.
func (r *rawConn) exec(ctx context.Context, query string, args ...any) error {
	r.args = r.args[:0]
	for i, a := range args {
		r.args = append(r.args, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	_, err := r.c.ExecContext(ctx, query, r.args)
	return err
}

// exists is the package's exists for a rawConn: ErrNotFound if table holds
// no row of id.
func (r *rawConn) exists(ctx context.Context, table, id string) error {
	rows, err := r.c.QueryContext(ctx, existsQuery(table), []driver.NamedValue{{Ordinal: 1, Value: id}})
	if err != nil {
		return err
	}
	defer rows.Close()
	err = rows.Next(make([]driver.Value, 1))
	if err == io.EOF {
		return ErrNotFound
	}
	return err
}

// updateRaw is update on a raw connection: fn runs in one write
// transaction, committed if it returns nil and ctx has not ended.
// Writers are serialised with update's. fn gets a context that does not
// end (see update); ctx ending still rolls the transaction back.
func (db *DB) updateRaw(ctx context.Context, fn func(ctx context.Context, r *rawConn) error) error {
	if err := db.writeTurn(ctx); err != nil {
		return err
	}
	defer db.endWrite()

	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer conn.Close()
	var ferr error
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			ferr = fmt.Errorf("beginning transaction: driver connection is a %T", dc)
			return nil
		}
		bg := context.WithoutCancel(ctx)
		r := &rawConn{c: c}
		if err := r.exec(bg, "BEGIN IMMEDIATE"); err != nil {
			ferr = fmt.Errorf("beginning transaction: %w", err)
			return nil
		}
		ferr = fn(bg, r)
		if ferr == nil {
			ferr = ctx.Err()
		}
		if ferr == nil {
			if ferr = r.exec(bg, "COMMIT"); ferr == nil {
				return nil
			}
			ferr = fmt.Errorf("committing: %w", ferr)
		}
		if err := r.exec(bg, "ROLLBACK"); err != nil && !c.AutoCommit() {
			// Still in the transaction: the pool must not hand this
			// connection out again.
			return driver.ErrBadConn
		}
		return nil
	})
	if ferr != nil {
		return constraintError(ferr)
	}
	if err != nil {
		return fmt.Errorf("write transaction: %w", err)
	}
	return nil
}
