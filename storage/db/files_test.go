package db

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fileDB returns a database with folder "f" and its local records
// seq 1..n named n0001.., each of a distinct size.
func fileDB(t testing.TB, n int) *DB {
	t.Helper()
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}))
	recs := make([]FileRecord, n)
	for i := range recs {
		recs[i] = FileRecord{Name: fmt.Sprintf("n%04d", i+1), Type: TypeFile, Size: int64(i + 1),
			ModTime: at(i), Sequence: int64(i + 1)}
	}
	must(t, db.PutFiles(ctx, "f", LocalDevice, recs))
	return db
}

// sameRecord compares records, treating nil and empty blobs as equal.
func sameRecord(a, b FileRecord) bool {
	if !bytes.Equal(a.Version, b.Version) || !bytes.Equal(a.Chunks, b.Chunks) || !a.ModTime.Equal(b.ModTime) {
		return false
	}
	a.Version, a.Chunks, b.Version, b.Chunks = nil, nil, nil, nil
	a.ModTime, b.ModTime = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func TestFileRoundTrip(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}))
	recs := []FileRecord{
		{Name: "a/b.txt", Type: TypeFile, Size: 1 << 40, Mode: 0o644, ModTime: at(0),
			Version: []byte{1, 2, 3}, Chunks: bytes.Repeat([]byte{0xAB}, 100_000), Sequence: 7},
		{Name: "a", Type: TypeDir, Mode: 0o755 | 1<<31, ModTime: time.Unix(0, 0), Sequence: 8},
		{Name: "link", Type: TypeSymlink, ModTime: time.Unix(-1, -1), Deleted: true, Version: []byte{}, Sequence: 9},
		{Name: "max", Type: TypeFile, Size: math.MaxInt64, Mode: math.MaxUint32, ModTime: time.Unix(0, math.MaxInt64), Sequence: math.MaxInt64},
		{Name: "min", Type: TypeFile, ModTime: time.Unix(0, math.MinInt64)},
		{Name: "ünïcødé/\u00e9", Type: TypeFile, ModTime: at(1), Sequence: 10},
	}
	must(t, db.PutFiles(ctx, "f", LocalDevice, recs))
	for _, want := range recs {
		got, err := db.File(ctx, "f", LocalDevice, want.Name)
		if err != nil {
			t.Fatalf("File(%q): %v", want.Name, err)
		}
		if !sameRecord(got, want) {
			t.Errorf("File(%q) = %+v\nwant %+v", want.Name, got, want)
		}
		if got.ModTime.Location() != time.UTC {
			t.Errorf("File(%q).ModTime in %v, want UTC", want.Name, got.ModTime.Location())
		}
	}
}

func TestFileRecordsPerDevice(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}))
	must(t, db.PutFiles(ctx, "f", LocalDevice, []FileRecord{{Name: "x", Type: TypeFile, Size: 1, ModTime: at(0), Sequence: 1}}))
	must(t, db.PutFiles(ctx, "f", "PEER", []FileRecord{{Name: "x", Type: TypeFile, Size: 2, ModTime: at(0), Sequence: 5}}))
	if r, err := db.File(ctx, "f", LocalDevice, "x"); err != nil || r.Size != 1 {
		t.Errorf("local record = %+v, %v", r, err)
	}
	if r, err := db.File(ctx, "f", "PEER", "x"); err != nil || r.Size != 2 {
		t.Errorf("peer record = %+v, %v", r, err)
	}
	for dev, want := range map[string]int64{LocalDevice: 1, "PEER": 5, "OTHER": 0} {
		if seq, err := db.MaxSequence(ctx, "f", dev); err != nil || seq != want {
			t.Errorf("MaxSequence(%q) = %d, %v; want %d", dev, seq, err, want)
		}
	}
	if seq, err := db.MaxSequence(ctx, "nofolder", LocalDevice); err != nil || seq != 0 {
		t.Errorf("MaxSequence of an unknown folder = %d, %v", seq, err)
	}
}

func TestPutFilesReplacesAndLastWins(t *testing.T) {
	db := fileDB(t, 3)
	ctx := context.Background()
	must(t, db.PutFiles(ctx, "f", LocalDevice, []FileRecord{
		{Name: "n0002", Type: TypeFile, Size: 20, ModTime: at(0), Sequence: 4},
		{Name: "n0002", Type: TypeFile, Size: 21, ModTime: at(0), Deleted: true, Sequence: 5},
	}))
	r, err := db.File(ctx, "f", LocalDevice, "n0002")
	if err != nil || r.Size != 21 || !r.Deleted || r.Sequence != 5 {
		t.Fatalf("replaced record = %+v, %v", r, err)
	}
	var names []string
	must(t, db.FilesSince(ctx, "f", LocalDevice, 0, func(r FileRecord) error {
		names = append(names, r.Name)
		return nil
	}))
	if !reflect.DeepEqual(names, []string{"n0001", "n0003", "n0002"}) {
		t.Errorf("records by sequence = %v", names)
	}
}

func TestPutFilesRefusesInvalid(t *testing.T) {
	db := fileDB(t, 1)
	ctx := context.Background()
	good := FileRecord{Name: "ok", Type: TypeFile, ModTime: at(0), Sequence: 2}
	for name, bad := range map[string]FileRecord{
		"empty name":     {Type: TypeFile, ModTime: at(0)},
		"bad type":       {Name: "x", Type: "fifo", ModTime: at(0)},
		"negative size":  {Name: "x", Type: TypeFile, Size: -1, ModTime: at(0)},
		"negative seq":   {Name: "x", Type: TypeFile, ModTime: at(0), Sequence: -1},
		"zero time":      {Name: "x", Type: TypeFile},
		"time too late":  {Name: "x", Type: TypeFile, ModTime: time.Unix(0, math.MaxInt64).Add(1)},
		"time too early": {Name: "x", Type: TypeFile, ModTime: time.Unix(0, math.MinInt64).Add(-1)},
	} {
		err := db.PutFiles(ctx, "f", LocalDevice, []FileRecord{good, bad})
		if !errors.Is(err, ErrConstraint) {
			t.Errorf("%s: %v, want ErrConstraint", name, err)
		}
	}
	err := db.PutFiles(ctx, "nofolder", LocalDevice, []FileRecord{good})
	if !errors.Is(err, ErrConstraint) {
		t.Errorf("unknown folder: %v, want ErrConstraint", err)
	}
	// All or nothing: the good record of each refused batch is absent.
	if _, err := db.File(ctx, "f", LocalDevice, "ok"); !errors.Is(err, ErrNotFound) {
		t.Errorf("record of a refused batch: %v, want ErrNotFound", err)
	}
	if _, err := db.File(ctx, "f", LocalDevice, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("File of a missing name: %v, want ErrNotFound", err)
	}
	// An empty batch is fine.
	must(t, db.PutFiles(ctx, "f", LocalDevice, nil))
}

// since collects the sequences FilesSince yields.
func since(t *testing.T, db *DB, after int64) []int64 {
	t.Helper()
	var seqs []int64
	must(t, db.FilesSince(context.Background(), "f", LocalDevice, after, func(r FileRecord) error {
		seqs = append(seqs, r.Sequence)
		return nil
	}))
	return seqs
}

func TestFilesSinceBoundaries(t *testing.T) {
	// Page boundaries: one page minus one, exactly one page, one more.
	for _, n := range []int{filePage - 1, filePage, filePage + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			db := fileDB(t, n)
			for _, after := range []int64{0, 1, int64(n) - 1, int64(n), int64(n) + 1, -1} {
				seqs := since(t, db, after)
				first := max(after+1, 1)
				want := max(int64(n)-first+1, 0)
				if int64(len(seqs)) != want {
					t.Fatalf("after %d: %d records, want %d", after, len(seqs), want)
				}
				for i, s := range seqs {
					if s != first+int64(i) {
						t.Fatalf("after %d: record %d has sequence %d, want %d", after, i, s, first+int64(i))
					}
				}
			}
		})
	}
}

func TestFilesSinceEqualSequencesAcrossPages(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	must(t, db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}))
	const n = 2*filePage + 1
	recs := make([]FileRecord, n)
	for i := range recs {
		recs[i] = FileRecord{Name: fmt.Sprintf("n%05d", i), Type: TypeFile, ModTime: at(0), Sequence: 3}
	}
	must(t, db.PutFiles(ctx, "f", LocalDevice, recs))
	seen := map[string]int{}
	must(t, db.FilesSince(ctx, "f", LocalDevice, 2, func(r FileRecord) error {
		seen[r.Name]++
		return nil
	}))
	if len(seen) != n {
		t.Fatalf("saw %d distinct records, want %d", len(seen), n)
	}
	for name, c := range seen {
		if c != 1 {
			t.Fatalf("record %s seen %d times", name, c)
		}
	}
	if got := since(t, db, 3); len(got) != 0 {
		t.Fatalf("after 3: %d records, want none", len(got))
	}
}

func TestFilesSinceCallbackMayWrite(t *testing.T) {
	db := fileDB(t, filePage+10)
	ctx := context.Background()
	// Each record of the first page is rewritten with a sequence ahead of
	// the iteration, so it must come round exactly once more.
	next := int64(filePage + 10)
	count := map[string]int{}
	must(t, db.FilesSince(ctx, "f", LocalDevice, 0, func(r FileRecord) error {
		count[r.Name]++
		if r.Sequence <= 5 {
			next++
			r.Sequence = next
			return db.PutFiles(ctx, "f", LocalDevice, []FileRecord{r})
		}
		return nil
	}))
	for i := 1; i <= filePage+10; i++ {
		name := fmt.Sprintf("n%04d", i)
		want := 1
		if i <= 5 {
			want = 2
		}
		if count[name] != want {
			t.Errorf("%s seen %d times, want %d", name, count[name], want)
		}
	}
}

func TestFilesSinceStopsOnError(t *testing.T) {
	db := fileDB(t, 10)
	stop := errors.New("stop")
	calls := 0
	err := db.FilesSince(context.Background(), "f", LocalDevice, 0, func(FileRecord) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 3 {
		t.Fatalf("FilesSince = %v after %d calls; want stop after 3", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.FilesSince(ctx, "f", LocalDevice, 0, func(FileRecord) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("FilesSince with a cancelled context: %v", err)
	}
	// An unknown folder has no records.
	must(t, db.FilesSince(context.Background(), "nofolder", LocalDevice, 0, func(FileRecord) error {
		t.Fatal("called for an unknown folder")
		return nil
	}))
}

func TestFilesSinceUsesIndex(t *testing.T) {
	db := fileDB(t, 1)
	rows, err := db.sql.Query("EXPLAIN QUERY PLAN "+localPageQuery, "f", 0, 0, filePage)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		must(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	t.Log(plan)
	for _, p := range plan {
		if strings.Contains(p, "TEMP B-TREE") || !strings.Contains(p, "files_sequence") || !strings.Contains(p, "sequence>?") {
			t.Errorf("plan step %q: want a range scan of files_sequence without sorting", p)
		}
	}
}

// FuzzFileRecord stores arbitrary records in a real database and checks
// they come back exactly, or are refused with ErrConstraint.
func FuzzFileRecord(f *testing.F) {
	f.Add("a/b.txt", "file", int64(10), uint32(0o644), int64(1_700_000_000_123_456_789), false, []byte{1}, []byte{2, 3}, int64(1))
	f.Add("", "dir", int64(0), uint32(0), int64(0), true, []byte(nil), []byte(nil), int64(0))
	f.Add("nul\x00byte", "symlink", int64(-1), uint32(1<<31), int64(math.MinInt64), false, []byte{}, []byte{0}, int64(-5))
	f.Add("\xff\xfe invalid utf-8", "fifo", int64(math.MaxInt64), uint32(math.MaxUint32), int64(math.MaxInt64), true, []byte("v"), []byte("c"), int64(math.MaxInt64))

	path := filepath.Join(f.TempDir(), "fuzz.db")
	db, err := Open(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if err := db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, name, typ string, size int64, mode uint32, ns int64, deleted bool, version, chunks []byte, seq int64) {
		r := FileRecord{Name: name, Type: FileType(typ), Size: size, Mode: mode, ModTime: time.Unix(0, ns),
			Deleted: deleted, Version: version, Chunks: chunks, Sequence: seq}
		err := db.PutFiles(ctx, "f", "D", []FileRecord{r})
		if r.check() != nil {
			if !errors.Is(err, ErrConstraint) {
				t.Fatalf("invalid record %+v: %v, want ErrConstraint", r, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("PutFiles(%+v): %v", r, err)
		}
		got, err := db.File(ctx, "f", "D", name)
		if err != nil {
			t.Fatalf("File(%q): %v", name, err)
		}
		if !sameRecord(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	})
}

func TestFileDetailsAndDeviceLists(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	if err := db.PutFolder(ctx, Folder{ID: "f", Path: "/x", Type: SendReceive}); err != nil {
		t.Fatal(err)
	}
	rec := FileRecord{Name: "link", Type: TypeSymlink, Target: "../t", ModifiedBy: 1 << 63, Inode: ^uint64(0), Flags: 3, Version: []byte{1}, ModTime: time.Unix(1, 0)}
	if err := db.PutFiles(ctx, "f", "PEER", []FileRecord{rec}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutFiles(ctx, "f", LocalDevice, []FileRecord{{Name: "a", Type: TypeFile, ModTime: time.Unix(1, 0)}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.File(ctx, "f", "PEER", "link")
	if err != nil {
		t.Fatal(err)
	}
	if got.Target != rec.Target || got.ModifiedBy != rec.ModifiedBy || got.Inode != rec.Inode || got.Flags != 3 {
		t.Fatalf("details lost: %+v", got)
	}
	if devs, err := db.FileDevices(ctx, "none"); err != nil || len(devs) != 0 {
		t.Fatalf("FileDevices of an empty folder: %q %v", devs, err)
	}
	devs, err := db.FileDevices(ctx, "f")
	if err != nil || len(devs) != 2 || devs[0] != LocalDevice || devs[1] != "PEER" {
		t.Fatalf("FileDevices: %q %v", devs, err)
	}
	if err := db.DeleteFiles(ctx, "f", "PEER"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.File(ctx, "f", "PEER", "link"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after DeleteFiles: %v", err)
	}
	if _, err := db.File(ctx, "f", LocalDevice, "a"); err != nil {
		t.Fatalf("DeleteFiles touched another device: %v", err)
	}
}

// TestPeerFiles: a peer's records, which the sequence index leaves out,
// come back whole from Files in name order and from FilesSince in
// sequence order, across pages, and apart from this node's.
func TestPeerFiles(t *testing.T) {
	db := fileDB(t, 0)
	ctx := context.Background()
	n := filePage + 7
	var recs []FileRecord
	for i := range n {
		recs = append(recs, FileRecord{Name: fmt.Sprintf("p%05d", i), Type: TypeFile, ModTime: at(i), Sequence: int64(n - i)})
	}
	must(t, db.PutFiles(ctx, "f", "PEER", recs))
	must(t, db.PutFiles(ctx, "f", LocalDevice, recs[:3]))
	var names []string
	must(t, db.Files(ctx, "f", "PEER", func(r FileRecord) error {
		names = append(names, r.Name)
		return nil
	}))
	if len(names) != n || !slices.IsSorted(names) {
		t.Fatalf("Files: %d names, sorted %v; want %d in order", len(names), slices.IsSorted(names), n)
	}
	var seqs []int64
	must(t, db.FilesSince(ctx, "f", "PEER", 5, func(r FileRecord) error {
		seqs = append(seqs, r.Sequence)
		return nil
	}))
	if len(seqs) != n-5 || seqs[0] != 6 || !slices.IsSorted(seqs) {
		t.Fatalf("FilesSince of a peer after 5: %d records from %v; want %d from 6, in order", len(seqs), seqs[:1], n-5)
	}
	var local int
	must(t, db.Files(ctx, "f", LocalDevice, func(FileRecord) error { local++; return nil }))
	if local != 3 {
		t.Fatalf("Files of this node: %d records, want 3", local)
	}
}
