package db

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestReceiverRetention(t *testing.T) {
	db, ctx := receiverFolder(t)
	if p, err := db.ReceiverRetention(ctx, "enc"); err != nil || p != (ReceiverRetention{}) {
		t.Fatalf("unset retention = %+v, %v", p, err)
	}
	want := ReceiverRetention{KeepLast: 1, KeepHourly: 2, KeepDaily: 3, KeepWeekly: 4, KeepMonthly: 5, KeepYearly: 6, KeepDeletedDays: 7}
	for _, p := range []ReceiverRetention{{KeepLast: 9}, want} {
		if err := db.SetReceiverRetention(ctx, "enc", p); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := db.ReceiverRetention(ctx, "enc"); err != nil || p != want {
		t.Fatalf("retention = %+v, %v; want %+v", p, err, want)
	}
	if err := db.SetReceiverRetention(ctx, "enc", ReceiverRetention{KeepWeekly: -1}); !errors.Is(err, ErrConstraint) {
		t.Fatalf("negative: %v", err)
	}
	if err := db.SetReceiverRetention(ctx, "nope", want); !errors.Is(err, ErrConstraint) {
		t.Fatalf("unknown folder: %v", err)
	}
}

func TestPruneSealed(t *testing.T) {
	db, ctx := receiverFolder(t)
	if _, err := db.InitReceiverLog(ctx, "enc", 1); err != nil {
		t.Fatal(err)
	}
	chunks := []SealedChunk{{ID: id32(1), Size: 10, StoredAt: at(0)}, {ID: id32(2), Size: 20, StoredAt: at(0)}}
	recs := []SealedRecord{rec(1, 7, 1, 1), rec(2, 7, 2, 2), rec(3, 8, 5, 1)}
	recs[1].FileKey = recs[0].FileKey
	recs[1].StoredAt = recs[0].StoredAt // a tie: by sequence
	if err := db.AppendSealed(ctx, "enc", recs, chunks); err != nil {
		t.Fatal(err)
	}
	var order []int64
	err := db.SealedVersions(ctx, "enc", func(r SealedRecord) error {
		if r.Sealed != nil {
			t.Errorf("version %d carries its payload", r.Seq)
		}
		order = append(order, r.Seq)
		return nil
	})
	if err != nil || !reflect.DeepEqual(order, []int64{2, 1, 3}) {
		t.Fatalf("versions %v, %v; want [2 1 3]", order, err)
	}
	// Drop the highest sequence and origin 8's only record.
	if err := db.PruneSealed(ctx, "enc", []int64{3, 99}, ReceiverHighWater{Counters: []OriginCounter{{Origin: id32(9), Counter: 4}}}); err != nil {
		t.Fatal(err)
	}
	hw, err := db.ReceiverHighWater(ctx, "enc")
	want := ReceiverHighWater{Sequence: 3, Counters: []OriginCounter{{id32(7), 2}, {id32(8), 5}, {id32(9), 4}}}
	if err != nil || !reflect.DeepEqual(hw, want) {
		t.Fatalf("high water = %+v, %v; want %+v", hw, err, want)
	}
	if seq, err := db.ReceiverLastSequence(ctx, "enc"); err != nil || seq != 3 {
		t.Fatalf("last sequence = %d, %v; want 3", seq, err)
	}
	if seq, err := db.ReceiverSequence(ctx, "enc"); err != nil || seq != 2 {
		t.Fatalf("records' sequence = %d, %v; want 2", seq, err)
	}
	// Marks never go down.
	if err := db.RaiseReceiverHighWater(ctx, "enc", ReceiverHighWater{Sequence: 1, Counters: []OriginCounter{{id32(8), 1}}}); err != nil {
		t.Fatal(err)
	}
	if again, _ := db.ReceiverHighWater(ctx, "enc"); !reflect.DeepEqual(again, want) {
		t.Fatalf("high water lowered to %+v", again)
	}
	for _, bad := range []ReceiverHighWater{{Sequence: -1}, {Counters: []OriginCounter{{id32(1)[:31], 1}}},
		{Counters: []OriginCounter{{id32(1), math.MaxInt64 + 1}}}} {
		if err := db.RaiseReceiverHighWater(ctx, "enc", bad); !errors.Is(err, ErrConstraint) {
			t.Fatalf("raise to %+v: %v", bad, err)
		}
	}
	if err := db.RaiseReceiverHighWater(ctx, "nope", ReceiverHighWater{Sequence: 1}); !errors.Is(err, ErrConstraint) {
		t.Fatalf("folder without log: %v", err)
	}
	if err := db.DeleteSealedChunks(ctx, "enc", [][]byte{id32(2), id32(3)}); err != nil {
		t.Fatal(err)
	}
	var left [][]byte
	_ = db.SealedChunks(ctx, "enc", func(c SealedChunk) error { left = append(left, c.ID); return nil })
	if !reflect.DeepEqual(left, [][]byte{id32(1)}) {
		t.Fatalf("chunks left %x", left)
	}
}
