package db

import (
	"context"
	"errors"
	"testing"
)

func TestSettings(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	if _, err := db.Setting(ctx, "gui.password"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Setting on empty db: %v, want ErrNotFound", err)
	}
	must(t, db.SetSetting(ctx, "gui.password", "hash1"))
	must(t, db.SetSetting(ctx, "other", ""))
	must(t, db.SetSetting(ctx, "gui.password", "hash2"))
	if v, err := db.Setting(ctx, "gui.password"); err != nil || v != "hash2" {
		t.Errorf("Setting after overwrite = %q, %v", v, err)
	}
	if v, err := db.Setting(ctx, "other"); err != nil || v != "" {
		t.Errorf("empty value = %q, %v", v, err)
	}
	must(t, db.DeleteSetting(ctx, "gui.password"))
	if _, err := db.Setting(ctx, "gui.password"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Setting after delete: %v, want ErrNotFound", err)
	}
	if err := db.DeleteSetting(ctx, "gui.password"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second DeleteSetting: %v, want ErrNotFound", err)
	}
	if err := db.SetSetting(ctx, "", "x"); !errors.Is(err, ErrConstraint) {
		t.Errorf("SetSetting with empty key: %v, want ErrConstraint", err)
	}
}
