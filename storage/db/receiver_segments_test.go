package db

import (
	"errors"
	"testing"
)

func TestReceiverSegment(t *testing.T) {
	db, ctx := receiverFolder(t)
	if _, err := db.ReceiverSegment(ctx, "enc"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("segment before any: %v", err)
	}
	if got, err := db.InitReceiverSegment(ctx, "enc", "o123"); err != nil || got != "o123" {
		t.Fatalf("InitReceiverSegment = %q, %v", got, err)
	}
	if got, err := db.InitReceiverSegment(ctx, "enc", "656e63"); err != nil || got != "o123" {
		t.Fatalf("a second init: %q, %v; want the first segment kept", got, err)
	}
	if err := db.PutFolder(ctx, Folder{ID: "two", Path: "/y", Type: Encrypted}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.InitReceiverSegment(ctx, "two", "o123"); !errors.Is(err, ErrConstraint) {
		t.Fatalf("a segment in use: %v, want ErrConstraint", err)
	}
	if _, err := db.InitReceiverSegment(ctx, "nope", "o9"); !errors.Is(err, ErrConstraint) {
		t.Fatalf("an unknown folder: %v, want ErrConstraint", err)
	}
}
