package db

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCheckScheduleAndResults(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	if err := db.PutFolder(ctx, Folder{ID: "docs", Path: "/x", Type: SendReceive}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetCheckSchedule(ctx, CheckSchedule{Folder: "nope", Every: time.Hour}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("schedule of an unknown folder: %v", err)
	}
	if err := db.SetCheckSchedule(ctx, CheckSchedule{Folder: "docs", Every: 7 * 24 * time.Hour, ReadData: "5%"}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetCheckSchedule(ctx, CheckSchedule{Folder: "docs", Every: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	got, err := db.CheckSchedules(ctx)
	if err != nil || len(got) != 1 || got[0].Every != 24*time.Hour || got[0].ReadData != "" {
		t.Fatalf("schedules %+v, %v; want the second one only", got, err)
	}
	if err := db.SetCheckSchedule(ctx, CheckSchedule{Folder: "docs"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.CheckSchedules(ctx); len(got) != 0 {
		t.Fatalf("schedule still there after removing it: %+v", got)
	}

	if _, err := db.LastCheck(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("last check before any: %v", err)
	}
	t1 := time.Unix(1000, 0).UTC()
	t2 := time.Unix(2000, 0).UTC()
	if err := db.PutCheckResult(ctx, CheckResult{Folder: "docs", Finished: t1, Clean: true, Reports: []byte("[]")}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutCheckResult(ctx, CheckResult{Folder: "docs", Finished: t2, Clean: false, Reports: []byte(`[{"x":1}]`)}); err != nil {
		t.Fatal(err)
	}
	r, err := db.LastCheck(ctx, "docs")
	if err != nil || !r.Finished.Equal(t2) || r.Clean || !r.LastClean.Equal(t1) || string(r.Reports) != `[{"x":1}]` {
		t.Fatalf("last check %+v, %v; want the failed one, last clean at the first", r, err)
	}
	if err := db.RemoveFolder(ctx, "docs"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LastCheck(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("last check outlived its folder: %v", err)
	}
}
