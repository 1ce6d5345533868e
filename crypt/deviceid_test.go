package crypt

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDeviceIDStringShape(t *testing.T) {
	for range 50 {
		var d DeviceID
		copy(d[:], randomBytes(t, 32))
		s := d.String()
		groups := strings.Split(s, "-")
		if len(groups) != 8 {
			t.Fatalf("%s: %d groups, want 8", s, len(groups))
		}
		for _, g := range groups {
			if len(g) != 7 || strings.Trim(g, luhnAlphabet) != "" {
				t.Fatalf("%s: bad group %q", s, g)
			}
		}
		got, err := ParseDeviceID(s)
		if err != nil || got != d {
			t.Fatalf("ParseDeviceID(%s) = %v, %v; want %v", s, got, err, d)
		}
	}
}

// TestDeviceIDSyncthingCompatible checks the Luhn variant against device IDs
// published by Syncthing, whose check characters this package must agree
// with.
func TestDeviceIDSyncthingCompatible(t *testing.T) {
	for _, s := range []string{
		"MFZWI3D-BONSGYC-YLTMRWG-C43ENR5-QXGZDMM-FZWI3DP-BONSGYY-LTMRWAD",
		"P56IOI7-MZJNU2Y-IQGDREY-DM2MGTI-MGL3BXN-PQ6W5BM-TBBZ4TJ-XZWICQ2",
	} {
		d, err := ParseDeviceID(s)
		if err != nil {
			t.Fatalf("ParseDeviceID(%s): %v", s, err)
		}
		if d.String() != s {
			t.Fatalf("String() = %s, want %s", d, s)
		}
	}
}

func TestParseDeviceIDLenient(t *testing.T) {
	d := DeviceIDFromSPKI([]byte("some key"))
	s := d.String()
	for _, in := range []string{
		strings.ToLower(s),
		strings.ReplaceAll(s, "-", ""),
		strings.ReplaceAll(s, "-", " "),
		" " + strings.ReplaceAll(strings.ToLower(s), "-", "\t") + "\n",
		s[:20] + strings.ToLower(s[20:]),
	} {
		got, err := ParseDeviceID(in)
		if err != nil || got != d {
			t.Errorf("ParseDeviceID(%q) = %v, %v; want %v", in, got, err, d)
		}
	}
}

// TestParseDeviceIDSubstitution changes every character to every other
// alphabet character: Luhn mod 32 catches every single substitution.
func TestParseDeviceIDSubstitution(t *testing.T) {
	d := DeviceIDFromSPKI([]byte("another key"))
	norm := []byte(strings.ReplaceAll(d.String(), "-", ""))
	for i := range norm {
		orig := norm[i]
		for _, c := range []byte(luhnAlphabet) {
			if c == orig {
				continue
			}
			norm[i] = c
			_, err := ParseDeviceID(string(norm))
			if !errors.Is(err, ErrInvalidDeviceID) {
				t.Fatalf("position %d = %c: err = %v, want ErrInvalidDeviceID", i, c, err)
			}
			// Only a wrong check character or, for the last data
			// character of the last block, non-canonical bits.
			group := i/(deviceIDBlock+1) + 1
			want := "check character of group " + string(rune('0'+group)) + " is wrong"
			if !strings.Contains(err.Error(), want) && !strings.Contains(err.Error(), "canonical") {
				t.Fatalf("position %d: %q does not say %q", i, err, want)
			}
		}
		norm[i] = orig
	}
}

func TestParseDeviceIDCheckGroupMessage(t *testing.T) {
	d := DeviceIDFromSPKI([]byte("third key"))
	s := d.String()
	// Group 3 spans shown groups 5 and 6; change the first character of 5.
	b := []byte(s)
	pos := 4 * 8 // start of shown group 5
	if b[pos] == 'A' {
		b[pos] = 'B'
	} else {
		b[pos] = 'A'
	}
	_, err := ParseDeviceID(string(b))
	if err == nil || !strings.Contains(err.Error(), "check character of group 3 is wrong") {
		t.Fatalf("err = %v, want it to name group 3", err)
	}
	if !strings.HasPrefix(err.Error(), "invalid device ID: ") {
		t.Fatalf("err = %q, want the sentinel's prefix", err)
	}
}

func TestParseDeviceIDRejects(t *testing.T) {
	s := strings.ReplaceAll(DeviceIDFromSPKI([]byte("k")).String(), "-", "")
	// The last data character holds 4 padding bits that must be zero:
	// make them non-zero and fix the check character.
	last := []byte(s[42:55])
	idx := strings.IndexByte(luhnAlphabet, last[12])
	last[12] = luhnAlphabet[idx|1]
	nonCanonical := s[:42] + string(last) + string(luhn32(string(last)))
	if idx&1 != 0 {
		t.Fatal("canonical encoding has a non-zero padding bit")
	}
	for name, in := range map[string]string{
		"empty":          "",
		"55 chars":       s[:55],
		"57 chars":       s + "A",
		"52 chars":       s[:13] + s[14:27] + s[28:41] + s[42:55],
		"digit 0":        "0" + s[1:],
		"digit 1":        "1" + s[1:],
		"digit 8":        s[:5] + "8" + s[6:],
		"padding":        s[:55] + "=",
		"unicode":        "Ä" + s[2:],
		"non-canonical":  nonCanonical,
		"dashes only":    "-------",
		"112 chars":      s + s,
		"check in place": s[:13] + s[12:13] + s[14:],
	} {
		if _, err := ParseDeviceID(in); !errors.Is(err, ErrInvalidDeviceID) {
			t.Errorf("%s: ParseDeviceID(%q) err = %v, want ErrInvalidDeviceID", name, in, err)
		}
	}
}

func TestDeviceIDFromSPKI(t *testing.T) {
	spki := []byte("not really DER, but any bytes hash")
	if got, want := DeviceIDFromSPKI(spki), DeviceID(sha256.Sum256(spki)); got != want {
		t.Fatalf("DeviceIDFromSPKI = %x, want %x", got, want)
	}
}

func TestShortID(t *testing.T) {
	for range 50 {
		var d DeviceID
		copy(d[:], randomBytes(t, 32))
		s := d.Short()
		var want uint64
		for _, b := range d[:8] {
			want = want<<8 | uint64(b)
		}
		if uint64(s) != want {
			t.Fatalf("Short() = %x, want %x", uint64(s), want)
		}
		if s.String() != d.String()[:7] {
			t.Fatalf("ShortID.String() = %s, want %s", s, d.String()[:7])
		}
	}
}

func TestDeviceIDZeroAndText(t *testing.T) {
	var z DeviceID
	if !z.IsZero() {
		t.Fatal("zero ID is not IsZero")
	}
	d := DeviceIDFromSPKI([]byte("x"))
	if d.IsZero() {
		t.Fatal("non-zero ID IsZero")
	}
	b, err := json.Marshal(map[string]DeviceID{"id": d})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"` + d.String() + `"}`; string(b) != want {
		t.Fatalf("JSON = %s, want %s", b, want)
	}
	var m map[string]DeviceID
	if err := json.Unmarshal(b, &m); err != nil || m["id"] != d {
		t.Fatalf("round trip = %v, %v", m, err)
	}
	keep := d
	if err := keep.UnmarshalText([]byte("nope")); !errors.Is(err, ErrInvalidDeviceID) {
		t.Fatalf("UnmarshalText(nope) = %v", err)
	}
	if keep != d {
		t.Fatal("failed UnmarshalText changed the ID")
	}
}
