package db

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestReceiverView(t *testing.T) {
	db, ctx := stateDB(t)
	view := func(folder string) ReceiverView {
		t.Helper()
		v, err := db.ReceiverView(ctx, folder, "R")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := view("docs"); v != (ReceiverView{}) {
		t.Fatalf("view before any write = %+v, want zero", v)
	}
	must(t, db.SetReceiverCursor(ctx, "docs", "R", 14))
	if v := view("docs"); v != (ReceiverView{Cursor: 14}) {
		t.Fatalf("after cursor = %+v", v)
	}
	must(t, db.SetReceiverHeld(ctx, "docs", "R", 7, 14))
	must(t, db.SetReceiverCursor(ctx, "docs", "R", math.MaxInt64))
	if v := view("docs"); v != (ReceiverView{Cursor: math.MaxInt64, Held: 7, HeldAt: 14}) {
		t.Fatalf("after held and cursor = %+v", v)
	}
	// Set means set: a lower value replaces a higher one.
	must(t, db.SetReceiverCursor(ctx, "docs", "R", 2))
	must(t, db.SetReceiverHeld(ctx, "docs", "R", 1, 2))
	if v := view("docs"); v != (ReceiverView{Cursor: 2, Held: 1, HeldAt: 2}) {
		t.Fatalf("after lowering = %+v", v)
	}
	// Held alone makes a view whose cursor is unknown.
	must(t, db.SetReceiverHeld(ctx, "music", "R", 3, 4))
	if v := view("music"); v != (ReceiverView{Held: 3, HeldAt: 4}) {
		t.Fatalf("held alone = %+v", v)
	}

	if err := db.SetReceiverCursor(ctx, "docs", "R", -1); !errors.Is(err, ErrConstraint) {
		t.Errorf("negative cursor: %v, want ErrConstraint", err)
	}
	if err := db.SetReceiverHeld(ctx, "docs", "R", 1, -1); !errors.Is(err, ErrConstraint) {
		t.Errorf("negative held-at: %v, want ErrConstraint", err)
	}
	if v := view("docs"); v != (ReceiverView{Cursor: 2, Held: 1, HeldAt: 2}) {
		t.Errorf("a refused write changed the view: %+v", v)
	}
	if err := db.SetReceiverCursor(ctx, "docs", "X", 1); !errors.Is(err, ErrConstraint) {
		t.Errorf("unknown device: %v, want ErrConstraint", err)
	}
	if err := db.SetReceiverHeld(ctx, "gone", "R", 1, 1); !errors.Is(err, ErrConstraint) {
		t.Errorf("unknown folder: %v, want ErrConstraint", err)
	}
}

func TestReceiverOriginsRaise(t *testing.T) {
	db, ctx := stateDB(t)
	origins := func() map[string]OriginMark {
		t.Helper()
		o, err := db.ReceiverOrigins(ctx, "docs", "R")
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if o := origins(); o == nil || len(o) != 0 {
		t.Fatalf("origins before any write = %#v, want an empty map", o)
	}
	must(t, db.RaiseReceiverOrigins(ctx, "docs", "R", map[string]OriginMark{"A": {Seen: 7}, "B": {Seen: 7, Mark: 5}}))
	// Seen from a log, marks from a cluster config: each raises its own.
	must(t, db.RaiseReceiverOrigins(ctx, "docs", "R", map[string]OriginMark{"A": {Mark: 9}, "B": {Seen: 3, Mark: 6}, "C": {Mark: 1}}))
	want := map[string]OriginMark{"A": {Seen: 7, Mark: 9}, "B": {Seen: 7, Mark: 6}, "C": {Mark: 1}}
	if o := origins(); !reflect.DeepEqual(o, want) {
		t.Fatalf("origins = %v\nwant      %v", o, want)
	}
	must(t, db.RaiseReceiverOrigins(ctx, "docs", "R", map[string]OriginMark{"A": {Seen: math.MaxInt64}}))
	want["A"] = OriginMark{Seen: math.MaxInt64, Mark: 9}
	if o := origins(); !reflect.DeepEqual(o, want) {
		t.Fatalf("origins = %v\nwant      %v", o, want)
	}

	// A bad entry fails the whole call, and the good ones with it.
	for _, bad := range []map[string]OriginMark{
		{"B": {Seen: 100}, "D": {Seen: math.MaxInt64 + 1}},
		{"B": {Seen: 100}, "E": {Mark: math.MaxUint64}},
		{"B": {Seen: 100}, "": {Seen: 1}},
	} {
		if err := db.RaiseReceiverOrigins(ctx, "docs", "R", bad); !errors.Is(err, ErrConstraint) {
			t.Errorf("RaiseReceiverOrigins(%v): %v, want ErrConstraint", bad, err)
		}
	}
	if o := origins(); !reflect.DeepEqual(o, want) {
		t.Fatalf("origins after refused raises = %v\nwant %v", o, want)
	}
	if err := db.RaiseReceiverOrigins(ctx, "docs", "X", map[string]OriginMark{"A": {Seen: 1}}); !errors.Is(err, ErrConstraint) {
		t.Errorf("unknown device: %v, want ErrConstraint", err)
	}
}

func TestForgetReceiverView(t *testing.T) {
	db, ctx := stateDB(t)
	for _, d := range []string{"R", "B"} {
		must(t, db.SetPeerIndexID(ctx, "docs", d, 5))
		must(t, db.SetReceiverCursor(ctx, "docs", d, 10))
		must(t, db.SetReceiverHeld(ctx, "docs", d, 4, 9))
		must(t, db.RaiseReceiverOrigins(ctx, "docs", d, map[string]OriginMark{"A": {Seen: 4}}))
	}
	must(t, db.ForgetReceiverView(ctx, "docs", "R"))
	must(t, db.ForgetReceiverView(ctx, "docs", "R")) // nothing left: not an error

	if v, err := db.ReceiverView(ctx, "docs", "R"); err != nil || v != (ReceiverView{}) {
		t.Errorf("view after forgetting = %+v, %v; want zero", v, err)
	}
	if o, err := db.ReceiverOrigins(ctx, "docs", "R"); err != nil || len(o) != 0 {
		t.Errorf("origins after forgetting = %v, %v; want none", o, err)
	}
	if id, err := db.PeerIndexID(ctx, "docs", "R"); err != nil || id != 5 {
		t.Errorf("the log ID went with the view: %d, %v", id, err)
	}
	if v, _ := db.ReceiverView(ctx, "docs", "B"); v != (ReceiverView{Cursor: 10, Held: 4, HeldAt: 9}) {
		t.Errorf("another receiver's view = %+v", v)
	}
	if o, _ := db.ReceiverOrigins(ctx, "docs", "B"); len(o) != 1 {
		t.Errorf("another receiver's origins = %v", o)
	}
}
