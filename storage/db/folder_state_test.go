package db

import (
	"context"
	"errors"
	"math"
	"testing"
)

// stateDB is a database with folders "docs" and "music" and devices "R"
// and "B".
func stateDB(t *testing.T) (*DB, context.Context) {
	t.Helper()
	db, _ := openTest(t)
	ctx := context.Background()
	for _, f := range []string{"docs", "music"} {
		must(t, db.PutFolder(ctx, Folder{ID: f, Path: "/" + f, Type: SendReceive}))
	}
	for _, d := range []string{"R", "B"} {
		must(t, db.PutDevice(ctx, Device{ID: d}))
	}
	return db, ctx
}

func TestFolderKey(t *testing.T) {
	db, ctx := stateDB(t)
	if _, err := db.FolderKey(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("key before set: %v, want ErrNotFound", err)
	}
	var k1, k2 [FolderKeySize]byte
	for i := range k1 {
		k1[i], k2[i] = byte(i), byte(255-i)
	}
	must(t, db.SetFolderKey(ctx, "docs", k1))
	if got, err := db.FolderKey(ctx, "docs"); err != nil || got != k1 {
		t.Fatalf("FolderKey = %x, %v; want %x", got, err, k1)
	}
	must(t, db.SetFolderKey(ctx, "docs", k2))
	if got, err := db.FolderKey(ctx, "docs"); err != nil || got != k2 {
		t.Fatalf("FolderKey after overwrite = %x, %v; want %x", got, err, k2)
	}
	if _, err := db.FolderKey(ctx, "music"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another folder's key: %v, want ErrNotFound", err)
	}
	if err := db.SetFolderKey(ctx, "gone", k1); !errors.Is(err, ErrConstraint) {
		t.Errorf("key of an unknown folder: %v, want ErrConstraint", err)
	}
}

func TestIndexID(t *testing.T) {
	db, ctx := stateDB(t)
	if _, err := db.IndexID(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("index ID before set: %v, want ErrNotFound", err)
	}
	// Every bit of a uint64 survives, the top one too.
	for _, id := range []uint64{1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64} {
		must(t, db.SetIndexID(ctx, "docs", id))
		if got, err := db.IndexID(ctx, "docs"); err != nil || got != id {
			t.Fatalf("IndexID = %d, %v; want %d", got, err, id)
		}
	}
	if err := db.SetIndexID(ctx, "docs", 0); !errors.Is(err, ErrConstraint) {
		t.Errorf("index ID 0: %v, want ErrConstraint", err)
	}
	if got, _ := db.IndexID(ctx, "docs"); got != math.MaxUint64 {
		t.Errorf("a refused ID replaced the stored one: %d", got)
	}
	if err := db.SetIndexID(ctx, "gone", 5); !errors.Is(err, ErrConstraint) {
		t.Errorf("index ID of an unknown folder: %v, want ErrConstraint", err)
	}
}

func TestPolynomial(t *testing.T) {
	db, ctx := stateDB(t)
	if _, _, err := db.Polynomial(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("polynomial before set: %v, want ErrNotFound", err)
	}
	if err := db.FixPolynomial(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("fixing a missing polynomial: %v, want ErrNotFound", err)
	}
	check := func(wantPol uint64, wantFixed bool) {
		t.Helper()
		pol, fixed, err := db.Polynomial(ctx, "docs")
		if err != nil || pol != wantPol || fixed != wantFixed {
			t.Fatalf("Polynomial = %#x, %v, %v; want %#x, %v", pol, fixed, err, wantPol, wantFixed)
		}
	}
	must(t, db.SetPolynomial(ctx, "docs", 0x3DA3358B4DC173))
	check(0x3DA3358B4DC173, false)
	// Unfixed, it may be replaced, by one with the top bit too.
	must(t, db.SetPolynomial(ctx, "docs", math.MaxUint64))
	check(math.MaxUint64, false)
	must(t, db.SetPolynomial(ctx, "docs", 0x2F0D5B3B1C9A6B))
	must(t, db.FixPolynomial(ctx, "docs"))
	must(t, db.FixPolynomial(ctx, "docs"))
	check(0x2F0D5B3B1C9A6B, true)
	// Fixed, it stays; setting it to itself is harmless.
	if err := db.SetPolynomial(ctx, "docs", 0x3DA3358B4DC173); !errors.Is(err, ErrPolynomialFixed) {
		t.Fatalf("replacing a fixed polynomial: %v, want ErrPolynomialFixed", err)
	}
	must(t, db.SetPolynomial(ctx, "docs", 0x2F0D5B3B1C9A6B))
	check(0x2F0D5B3B1C9A6B, true)

	if err := db.SetPolynomial(ctx, "music", 0); !errors.Is(err, ErrConstraint) {
		t.Errorf("polynomial 0: %v, want ErrConstraint", err)
	}
	if err := db.SetPolynomial(ctx, "gone", 5); !errors.Is(err, ErrConstraint) {
		t.Errorf("polynomial of an unknown folder: %v, want ErrConstraint", err)
	}
}

func TestVersioningPolicy(t *testing.T) {
	db, ctx := stateDB(t)
	if _, err := db.VersioningPolicy(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("policy before set: %v, want ErrNotFound", err)
	}
	for _, p := range []VersioningPolicy{
		{Type: "simple", Keep: 5},
		{Type: "staggered", Days: 365},
		{}, // a zero policy is stored as such, not as no policy
	} {
		must(t, db.SetVersioningPolicy(ctx, "docs", p))
		if got, err := db.VersioningPolicy(ctx, "docs"); err != nil || got != p {
			t.Fatalf("VersioningPolicy = %+v, %v; want %+v", got, err, p)
		}
	}
	for _, p := range []VersioningPolicy{{Type: "simple", Keep: -1}, {Type: "trashcan", Days: -1}} {
		if err := db.SetVersioningPolicy(ctx, "docs", p); !errors.Is(err, ErrConstraint) {
			t.Errorf("policy %+v: %v, want ErrConstraint", p, err)
		}
	}
	if err := db.SetVersioningPolicy(ctx, "gone", VersioningPolicy{Type: "simple", Keep: 1}); !errors.Is(err, ErrConstraint) {
		t.Errorf("policy of an unknown folder: %v, want ErrConstraint", err)
	}
}

// TestFolderStateDiesWithFolder checks that removing a folder forgets its
// state, and only its own: a folder added again under the same ID starts
// afresh.
func TestFolderStateDiesWithFolder(t *testing.T) {
	db, ctx := stateDB(t)
	for _, f := range []string{"docs", "music"} {
		must(t, db.SetFolderKey(ctx, f, [FolderKeySize]byte{1}))
		must(t, db.SetIndexID(ctx, f, 7))
		must(t, db.SetPolynomial(ctx, f, 9))
		must(t, db.FixPolynomial(ctx, f))
		must(t, db.SetVersioningPolicy(ctx, f, VersioningPolicy{Type: "simple", Keep: 3}))
	}
	must(t, db.RemoveFolder(ctx, "docs"))
	must(t, db.PutFolder(ctx, Folder{ID: "docs", Path: "/docs", Type: SendReceive}))

	if _, err := db.FolderKey(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Errorf("key after removal: %v, want ErrNotFound", err)
	}
	if _, err := db.IndexID(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Errorf("index ID after removal: %v, want ErrNotFound", err)
	}
	if _, _, err := db.Polynomial(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Errorf("polynomial after removal: %v, want ErrNotFound", err)
	}
	if _, err := db.VersioningPolicy(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Errorf("policy after removal: %v, want ErrNotFound", err)
	}

	if _, err := db.FolderKey(ctx, "music"); err != nil {
		t.Errorf("the other folder's key: %v", err)
	}
	if _, err := db.IndexID(ctx, "music"); err != nil {
		t.Errorf("the other folder's index ID: %v", err)
	}
	if _, fixed, err := db.Polynomial(ctx, "music"); err != nil || !fixed {
		t.Errorf("the other folder's polynomial: fixed %v, %v", fixed, err)
	}
	if _, err := db.VersioningPolicy(ctx, "music"); err != nil {
		t.Errorf("the other folder's policy: %v", err)
	}
}

func TestFolderKeyRing(t *testing.T) {
	ctx := context.Background()
	d, _ := openTest(t)
	if err := d.PutFolder(ctx, Folder{ID: "f", Path: t.TempDir(), Type: SendReceive}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.FolderKeyRing(ctx, "f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ring of a folder without a key: %v", err)
	}
	k1, k2, k3 := [FolderKeySize]byte{1}, [FolderKeySize]byte{2}, [FolderKeySize]byte{3}
	if err := d.SetFolderKey(ctx, "f", k1); err != nil {
		t.Fatal(err)
	}
	if ring, err := d.FolderKeyRing(ctx, "f"); err != nil || len(ring) != 1 || ring[0] != k1 {
		t.Fatalf("ring %x, %v", ring, err)
	}
	if err := d.SetFolderKeyRing(ctx, "f", [][FolderKeySize]byte{k1, k2, k3}); err != nil {
		t.Fatal(err)
	}
	if ring, err := d.FolderKeyRing(ctx, "f"); err != nil || len(ring) != 3 || ring[0] != k1 || ring[1] != k2 || ring[2] != k3 {
		t.Fatalf("ring %x, %v", ring, err)
	}
	if k, err := d.FolderKey(ctx, "f"); err != nil || k != k1 {
		t.Fatalf("first key %x, %v", k, err)
	}
	if err := d.SetFolderKeyRing(ctx, "f", nil); err == nil {
		t.Fatal("an empty ring stored")
	}
	if err := d.RemoveFolder(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.sql.QueryRow("SELECT count(*) FROM folder_key_ring").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d ring keys left after the folder went (%v)", n, err)
	}
}
