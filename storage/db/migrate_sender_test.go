package db

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// Tests of migration 0008, which moves a trusted device's state out of
// settings into typed tables.

// migrationsUpTo returns the embedded migrations 1 to n.
func migrationsUpTo(t *testing.T, n int) fstest.MapFS {
	t.Helper()
	migs, err := loadMigrations(embeddedMigrations)
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, m := range migs[:n] {
		out[m.name] = &fstest.MapFile{Data: []byte(m.sql)}
	}
	return out
}

// settingsLeft returns every key left in settings, sorted.
func settingsLeft(t *testing.T, db *DB) []string {
	t.Helper()
	rows, err := db.sql.Query("SELECT key FROM settings ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	keys := []string{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMigrateFrozenTrustedDatabase opens a copy of a database written by
// the release before migration 0008 (see testdata/README.md) and checks
// that every one of its settings landed in the typed tables.
func TestMigrateFrozenTrustedDatabase(t *testing.T) {
	const (
		a = "MZCFO4O-K6NOFTJ-YLGLYOO-3XC55Q2-4XK4BJQ-XPL4E34-XL4EE4P-JONQQQI"
		b = "K6SGPG4-SZGZY6S-H2VHFQV-BUTNG2W-QVRC4PQ-ADAWXMS-IIWWNLD-RENJPAX"
		r = "XBDU5GA-QYVPRDZ-FJVB6IL-E4FSSZ3-IOAQTP5-PUTOZV6-FPC5KSO-QAFCHQY"
	)
	frozen, err := os.ReadFile(filepath.Join("testdata", "v7-trusted.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "lockstep.db")
	if err := os.WriteFile(path, frozen, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	migs, err := loadMigrations(embeddedMigrations)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := db.schemaVersion(ctx); err != nil || v != len(migs) {
		t.Fatalf("schema version %d, %v; want %d", v, err, len(migs))
	}
	for folder, want := range map[string]string{
		"docs":  "5106c18df8e8b72637a8550ce59bf92441599c9c884afb209845209fd20e13ed",
		"notes": "411b68dcabb791e82bdbff42831b17f5c713ce3a8d7a48482704c001b9768417",
	} {
		if k, err := db.FolderKey(ctx, folder); err != nil || hex.EncodeToString(k[:]) != want {
			t.Errorf("FolderKey(%s) = %x, %v; want %s", folder, k, err, want)
		}
	}
	for folder, want := range map[string]uint64{"docs": 12753981071830394959, "notes": 13393268802858844349} {
		if id, err := db.IndexID(ctx, folder); err != nil || id != want {
			t.Errorf("IndexID(%s) = %d, %v; want %d", folder, id, err, want)
		}
	}
	for dev, want := range map[string]uint64{b: 15421965637418370233, r: 2812602595228261269} {
		if id, err := db.PeerIndexID(ctx, "docs", dev); err != nil || id != want {
			t.Errorf("PeerIndexID(docs, %.7s) = %d, %v; want %d", dev, id, err, want)
		}
	}
	wantEnv := mustHex(t, "6c6f636b737465702d656e76656c6f70652f76310a7000d66167652d656e6372797074696f6e2e6f72672f76310a2d3e2073637279707420576e57582b584f4369596862705a654f4138354a39412031380a526c54436e6d46783372557574567a7a562f42325953334a3832682b4330685a767657643775446b3557770a2d2d2d206d48504f7a71324637514535785857716d51715439512b686d58796a56394c6e4c614a3565337149624b770a06701caf87b0ee8d924c2ac1765b6fbdf4b65fe0a04097741761c2e326d818bdc21392c06ee932d54e673bdc642efecd1e47c0584081429dcee494833070eede")
	if env, err := db.PendingEnvelope(ctx, "notes", r); err != nil || string(env) != string(wantEnv) {
		t.Errorf("PendingEnvelope(notes, R) = %x, %v", env, err)
	}
	if _, err := db.PendingEnvelope(ctx, "docs", r); !errors.Is(err, ErrNotFound) {
		t.Errorf("PendingEnvelope(docs, R): %v, want ErrNotFound (the receiver took it)", err)
	}
	for folder, want := range map[string]uint64{"docs": 17257882593922285, "notes": 10165099626041597} {
		if pol, fixed, err := db.Polynomial(ctx, folder); err != nil || pol != want || !fixed {
			t.Errorf("Polynomial(%s) = %d, %v, %v; want %d, fixed", folder, pol, fixed, err, want)
		}
	}
	if p, err := db.VersioningPolicy(ctx, "docs"); err != nil || p != (VersioningPolicy{Type: "simple", Keep: 5}) {
		t.Errorf("VersioningPolicy(docs) = %+v, %v", p, err)
	}
	if _, err := db.VersioningPolicy(ctx, "notes"); !errors.Is(err, ErrNotFound) {
		t.Errorf("VersioningPolicy(notes): %v, want ErrNotFound", err)
	}
	if v, err := db.ReceiverView(ctx, "docs", r); err != nil || v != (ReceiverView{Cursor: 14, Held: 7, HeldAt: 14}) {
		t.Errorf("ReceiverView(docs, R) = %+v, %v", v, err)
	}
	wantOrigins := map[string]OriginMark{b: {Seen: 7}, a: {Seen: 7, Mark: 5}}
	if o, err := db.ReceiverOrigins(ctx, "docs", r); err != nil || !reflect.DeepEqual(o, wantOrigins) {
		t.Errorf("ReceiverOrigins(docs, R) = %v, %v\nwant %v", o, err, wantOrigins)
	}
	if keys := settingsLeft(t, db); len(keys) != 0 {
		t.Errorf("settings left: %q", keys)
	}
	// The rest of the database is as it was.
	if ids, err := db.FolderDevices(ctx, "docs"); err != nil || len(ids) != 2 {
		t.Errorf("FolderDevices(docs) = %v, %v", ids, err)
	}
	if n := countRows(t, db, "files"); n != 19 {
		t.Errorf("%d file records, want 19", n)
	}
}

// canonicalID is a device ID of the canonical form's shape, 8 groups of 7
// characters: the migration takes a device's key apart by that length.
func canonicalID(c byte) string {
	g := strings.Repeat(string(c), 7)
	return strings.Repeat(g+"-", 7) + g
}

// TestMigrateSettingsEdgeCases builds a version 7 database with settings
// the old code wrote, and some it could not read, and checks migration
// 0008 on them: folder IDs with '/' (and one that is a prefix of another),
// keys of removed folders and devices, damaged values, every boundary of
// a uint64.
func TestMigrateSettingsEdgeCases(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lockstep.db")
	old, err := openWith(ctx, path, migrationsUpTo(t, 7))
	if err != nil {
		t.Fatal(err)
	}
	d1, d2, gone := canonicalID('A'), canonicalID('B'), canonicalID('C')
	const slashed, unicode = "a/b", "ünï/cödé"
	for _, f := range []string{"docs", "a", slashed, unicode, "x", "y", "gone"} {
		must(t, old.PutFolder(ctx, Folder{ID: f, Path: "/f", Type: SendReceive}))
	}
	for _, d := range []string{d1, d2, gone} {
		// As the schema-7 code wrote a device: today's PutDevice needs
		// migration 0009's tables.
		_, err := old.sql.ExecContext(ctx, "INSERT INTO devices (id, added_at) VALUES (?, 1)", d)
		must(t, err)
	}
	k1 := strings.Repeat("01", 16) + strings.Repeat("ab", 16)
	k2 := strings.Repeat("FE", 32)
	settings := map[string]string{
		"folder-key/" + slashed: k1,
		"folder-key/a":          k2,            // upper case, as hex.DecodeString takes it
		"folder-key/x":          "zz" + k1[2:], // damaged
		"folder-key/docs":       k1[:62],       // 31 bytes
		"folder-key/gone":       k1,            // its folder is removed below
		"folder-key/nowhere":    k1,            // never had a folder
		"index-id/docs":         "18446744073709551615",
		"index-id/a":            "9223372036854775808",
		"index-id/" + slashed:   "9223372036854775807",
		"index-id/" + unicode:   "0001",
		"index-id/x":            "18446744073709551616", // overflows
		"index-id/y":            "0018446744073709551615",
		"index-id/gone":         "5",

		"peer-index-id/" + slashed + "/" + d1: "12753981071830394959",
		"peer-index-id/a/" + d1:               "abc",
		"peer-index-id/a/" + gone:             "5", // its device is removed below
		"peer-index-id/docs/" + d2:            "0",
		"peer-index-id/docs/" + d1:            "+5",

		"polynomial/" + slashed:       "17257882593922285",
		"polynomial-fixed/" + slashed: "1",
		"polynomial/a":                "10165099626041597",
		"polynomial-fixed/a":          "0",
		"polynomial-fixed/docs":       "1", // no polynomial
		"polynomial/x":                "18446744073709551615",

		"versioning/" + slashed: `{"Type":"staggered","Keep":0,"Days":365}`,
		"versioning/a":          `{"Type":"simple","Keep":5}`,
		"versioning/" + unicode: `{"Type":null,"Keep":null,"Days":null}`,
		"versioning/x":          "not json",
		"versioning/docs":       `{"Type":"simple","Keep":-1,"Days":0}`,

		"pending-envelope/" + slashed + "/" + d1: hex.EncodeToString([]byte("envelope")),
		"pending-envelope/" + slashed + "/" + d2: "",
		"pending-envelope/a/" + d1:               "not hex",

		"receiver-log/" + slashed + "/" + d1:     "14",
		"receiver-held/" + slashed + "/" + d1:    "7",
		"receiver-held-at/" + slashed + "/" + d1: "14",
		"receiver-held-at/a/" + d1:               "3",
		"receiver-log/a/" + d2:                   "-1",
		"receiver-log/" + unicode + "/" + d2:     "5",
		"receiver-log/docs/" + d1[1:]:            "5", // a device ID one short
		"receiver-log/" + d1:                     "5", // no folder
		"receiver-log/docs" + d1:                 "5", // no '/' before the device
		"receiver-held/gone/" + d1:               "5",

		"receiver-origins/" + slashed + "/" + d1: `{"` + d1 + `":{"seen":7},"` + d2 + `":{"seen":7,"mark":5}}`,
		"receiver-origins/a/" + d1:               `{broken`,
		"receiver-origins/a/" + d2:               `{"` + d1 + `":{"seen":18446744073709551615},"` + d2 + `":{"mark":2},"` + gone + `":{}}`,
		"receiver-origins/docs/" + d1:            `[1,2]`,
		"receiver-origins/x/" + d1:               `{"` + d2 + `":{"seen":9,"mark":1},"` + d2 + `":{"seen":2,"mark":3}}`,

		"gui.password":  "hash",
		"folder-keys/x": "not ours",
		"other/thing":   "not ours",
	}
	for k, v := range settings {
		must(t, old.SetSetting(ctx, k, v))
	}
	must(t, old.RemoveFolder(ctx, "gone"))
	must(t, old.RemoveDevice(ctx, gone))
	must(t, old.Close())

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	if want := []string{"folder-keys/x", "gui.password", "other/thing"}; !reflect.DeepEqual(settingsLeft(t, db), want) {
		t.Errorf("settings left = %q, want %q", settingsLeft(t, db), want)
	}
	for table, want := range map[string]int{
		"folder_keys": 2, "folder_index_ids": 5, "peer_index_ids": 1, "folder_polynomials": 3,
		"folder_versioning": 3, "pending_envelopes": 1, "receiver_views": 3, "receiver_view_origins": 5,
	} {
		if n := countRows(t, db, table); n != want {
			t.Errorf("%s has %d rows, want %d", table, n, want)
		}
	}

	for folder, want := range map[string]string{slashed: k1, "a": strings.ToLower(k2)} {
		if k, err := db.FolderKey(ctx, folder); err != nil || hex.EncodeToString(k[:]) != want {
			t.Errorf("FolderKey(%q) = %x, %v; want %s", folder, k, err, want)
		}
	}
	for folder, want := range map[string]uint64{
		"docs": math.MaxUint64, "a": math.MaxInt64 + 1, slashed: math.MaxInt64, unicode: 1, "y": math.MaxUint64,
	} {
		if id, err := db.IndexID(ctx, folder); err != nil || id != want {
			t.Errorf("IndexID(%q) = %d, %v; want %d", folder, id, err, want)
		}
	}
	if id, err := db.PeerIndexID(ctx, slashed, d1); err != nil || id != 12753981071830394959 {
		t.Errorf("PeerIndexID(%q, d1) = %d, %v", slashed, id, err)
	}
	for folder, want := range map[string]struct {
		pol   uint64
		fixed bool
	}{slashed: {17257882593922285, true}, "a": {10165099626041597, false}, "x": {math.MaxUint64, false}} {
		if pol, fixed, err := db.Polynomial(ctx, folder); err != nil || pol != want.pol || fixed != want.fixed {
			t.Errorf("Polynomial(%q) = %d, %v, %v; want %+v", folder, pol, fixed, err, want)
		}
	}
	if _, _, err := db.Polynomial(ctx, "docs"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Polynomial(docs), fixed without one: %v, want ErrNotFound", err)
	}
	for folder, want := range map[string]VersioningPolicy{
		slashed: {Type: "staggered", Days: 365}, "a": {Type: "simple", Keep: 5}, unicode: {},
	} {
		if p, err := db.VersioningPolicy(ctx, folder); err != nil || p != want {
			t.Errorf("VersioningPolicy(%q) = %+v, %v; want %+v", folder, p, err, want)
		}
	}
	if env, err := db.PendingEnvelope(ctx, slashed, d1); err != nil || string(env) != "envelope" {
		t.Errorf("PendingEnvelope(%q, d1) = %q, %v", slashed, env, err)
	}
	for _, c := range []struct {
		folder, dev string
		want        ReceiverView
	}{
		{slashed, d1, ReceiverView{Cursor: 14, Held: 7, HeldAt: 14}},
		{"a", d1, ReceiverView{HeldAt: 3}},
		{unicode, d2, ReceiverView{Cursor: 5}},
	} {
		if v, err := db.ReceiverView(ctx, c.folder, c.dev); err != nil || v != c.want {
			t.Errorf("ReceiverView(%q, %.1s) = %+v, %v; want %+v", c.folder, c.dev, v, err, c.want)
		}
	}
	for _, c := range []struct {
		folder, dev string
		want        map[string]OriginMark
	}{
		{slashed, d1, map[string]OriginMark{d1: {Seen: 7}, d2: {Seen: 7, Mark: 5}}},
		// An origin this device does not know is kept; a counter past
		// int64 is not (counters are int64 log sequences).
		{"a", d2, map[string]OriginMark{d2: {Mark: 2}, gone: {}}},
		{"a", d1, map[string]OriginMark{}},
		{"x", d1, map[string]OriginMark{d2: {Seen: 9, Mark: 3}}},
	} {
		if o, err := db.ReceiverOrigins(ctx, c.folder, c.dev); err != nil || !reflect.DeepEqual(o, c.want) {
			t.Errorf("ReceiverOrigins(%q, %.1s) = %v, %v; want %v", c.folder, c.dev, o, err, c.want)
		}
	}
}

// TestMigrateUint64Decimals checks the migration's reading of decimal
// uint64 values into their int64 bit pattern, on every boundary of the
// arithmetic and on random values, against strconv.
func TestMigrateUint64Decimals(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lockstep.db")
	old, err := openWith(ctx, path, migrationsUpTo(t, 7))
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint64{
		1, 9, 10, 1e9, 1e10 - 1, 1e10, 1e18, 1e19 - 1, 1e19, math.MaxInt64 - 1, math.MaxInt64,
		math.MaxInt64 + 1, math.MaxInt64 + 2, 9223372039999999999, 9223372040000000000,
		18446744060000000000, 18446744069999999999, 18446744070000000000, math.MaxUint64 - 1, math.MaxUint64,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		ids = append(ids, rng.Uint64()|1, rng.Uint64()>>rng.IntN(64)|1)
	}
	folders := make([]string, len(ids))
	for i, id := range ids {
		folders[i] = fmt.Sprintf("f%d", i)
		must(t, old.PutFolder(ctx, Folder{ID: folders[i], Path: "/f", Type: SendReceive}))
		must(t, old.SetSetting(ctx, "index-id/"+folders[i], strconv.FormatUint(id, 10)))
	}
	must(t, old.Close())

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, want := range ids {
		if got, err := db.IndexID(ctx, folders[i]); err != nil || got != want {
			t.Errorf("index ID %d read back as %d, %v", want, got, err)
		}
	}
}
