package versions

import (
	"errors"
	"path"
	"testing"
	"time"

	"lockstep/sync/fsys"
)

func TestParseID(t *testing.T) {
	ok := []struct {
		id, name string
		at       time.Time
		seq      int
	}{
		{"a/b~20260102-030405.txt", "a/b.txt", t0, 1},
		{"b~20260102-030405-2.txt", "b.txt", t0, 2},
		{"b~20260102-030405-999999999", "b", t0, 999999999},
		{".bashrc~00010101-000000", ".bashrc", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), 1},
		{"a~b~99991231-235959.c", "a~b.c", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), 1},
	}
	for _, c := range ok {
		name, at, seq, err := ParseID(c.id)
		if err != nil || name != c.name || !at.Equal(c.at) || seq != c.seq {
			t.Errorf("ParseID(%q) = %q, %v, %d, %v; want %q, %v, %d", c.id, name, at, seq, err, c.name, c.at, c.seq)
		}
	}
	bad := []string{
		"", "b.txt", "b~.txt", "~20260102-030405", "b~20260102-030405-1",
		"b~20260102-030405-0", "b~20260102-030405-02", "b~20260102-030405-1234567890",
		"b~20260102-030405-", "b~20260102-030405x", "b~2026010-0304056",
		"b~20260230-030405", "b~20260102-240000", "b~00000101-000000",
		"b~+0260102-030405", "b~20260102-03040５", "a.b~20260102-030405",
		"../b~20260102-030405", "a//b~20260102-030405", "/b~20260102-030405",
		fsys.TempPrefix + "~20260102-030405", ".lockstep/b~20260102-030405",
	}
	for _, id := range bad {
		if _, _, _, err := ParseID(id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseID(%q) = %v, want ErrInvalidID", id, err)
		}
	}
}

func TestArchivedBaseRange(t *testing.T) {
	for _, at := range []time.Time{time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if b, err := archivedBase("f", at, 1); err == nil {
			t.Errorf("archivedBase at %v = %q, want an error", at, b)
		}
	}
}

// FuzzParseID checks that every ID ParseID accepts is exactly the one
// Save would write for the name, time and counter it decodes to, and that
// every valid name round-trips through an archived name.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{
		"a/b~20260102-030405.txt", "b~20260102-030405-2.txt", ".bashrc~20260102-030405",
		".~20260102-030405.a", "x~1~20260102-030405", "a.b~20260102-030405",
		"d/ü~20260102-030405-17.日本", "b~20260102-030405-02", "",
	} {
		f.Add(s, int64(1767323045), uint16(1))
	}
	f.Fuzz(func(t *testing.T, s string, unix int64, seq16 uint16) {
		if name, at, seq, err := ParseID(s); err == nil {
			dir, base := path.Split(name)
			b, err := archivedBase(base, at, seq)
			if err != nil || dir+b != s {
				t.Fatalf("ParseID(%q) = %q, %v, %d; encodes back to %q, %v", s, name, at, seq, dir+b, err)
			}
		}
		if fsys.ValidName(s) != nil {
			return
		}
		at := time.Unix(unix%253402300800, 0).UTC() // years 1970..9999
		if at.Year() < 1970 {
			at = at.AddDate(2000, 0, 0)
		}
		seq := int(seq16)%maxSeq + 1
		dir, base := path.Split(s)
		b, err := archivedBase(base, at, seq)
		if err != nil {
			t.Fatalf("archivedBase(%q, %v): %v", base, at, err)
		}
		id := dir + b
		if fsys.ValidName(id) != nil {
			return // too long, or made a reserved name
		}
		name, at2, seq2, err := ParseID(id)
		if err != nil || name != s || !at2.Equal(at) || seq2 != seq {
			t.Fatalf("ParseID(%q) = %q, %v, %d, %v; want %q, %v, %d", id, name, at2, seq2, err, s, at, seq)
		}
	})
}
