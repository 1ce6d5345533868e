package db

import (
	"context"
	"errors"
	"testing"
)

// A raw write transaction commits what fn wrote, rolls back what it wrote
// when fn fails or the caller's context ends, and leaves its connection
// fit for the next transaction either way.
func TestUpdateRaw(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	put := func(ctx context.Context, key string, fail error, cancel func()) error {
		return db.updateRaw(ctx, func(ctx context.Context, r *rawConn) error {
			if ctx.Done() != nil {
				t.Error("statements got a context that can end")
			}
			if err := r.exec(ctx, `INSERT INTO settings (key, value) VALUES (?, 'v')`, key); err != nil {
				return err
			}
			if cancel != nil {
				cancel()
			}
			return fail
		})
	}
	boom := errors.New("boom")
	if err := put(ctx, "failed", boom, nil); !errors.Is(err, boom) {
		t.Fatalf("failing transaction: %v, want %v", err, boom)
	}
	cctx, cancel := context.WithCancel(ctx)
	if err := put(cctx, "cancelled", nil, cancel); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled transaction: %v, want context.Canceled", err)
	}
	// Run more transactions than the pool has connections: none was left
	// inside a transaction.
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := put(ctx, key, nil, nil); err != nil {
			t.Fatalf("transaction after the failed ones: %v", err)
		}
	}
	for _, key := range []string{"failed", "cancelled"} {
		if _, err := db.Setting(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Errorf("setting %q of a rolled back transaction: %v, want ErrNotFound", key, err)
		}
	}
	if v, err := db.Setting(ctx, "h"); err != nil || v != "v" {
		t.Errorf("committed setting: %q, %v", v, err)
	}
	// A constraint broken is ErrConstraint, as from update.
	if err := put(ctx, "a", nil, nil); !errors.Is(err, ErrConstraint) {
		t.Errorf("duplicate key: %v, want ErrConstraint", err)
	}
}
