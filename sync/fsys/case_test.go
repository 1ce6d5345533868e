package fsys

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSameFold(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"foo", "Foo", true},
		{"FOO.TXT", "foo.txt", true},
		{"foo", "foo", false},
		{"foo", "fop", false},
		{"Ünïcödé", "üNÏCÖDÉ", true},
		{"caf\u00e9", "CAFE\u0301", true}, // NFC vs NFD
		{"k", "\u212a", true},             // Kelvin sign folds to k
		{"straße", "STRASSE", false},      // full folding is not modelled
		{"a", "ab", false},
	} {
		if got := sameFold(tc.a, tc.b); got != tc.want {
			t.Errorf("sameFold(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestSwapCase(t *testing.T) {
	if got := swapCase(".Lockstep-Tmp-1ü"); got != ".lOCKSTEP-tMP-1Ü" {
		t.Errorf("swapCase = %q", got)
	}
}

// TestCaseInsensitiveProbe compares the probe with a direct check of the
// filesystem under the test directory, and checks the probe leaves nothing
// behind.
func TestCaseInsensitiveProbe(t *testing.T) {
	r, dir := openRoot(t)
	writeOS(t, filepath.Join(dir, "probe"), "x")
	_, err := os.Lstat(filepath.Join(dir, "PROBE"))
	want := err == nil
	if got := r.CaseInsensitive(); got != want {
		t.Errorf("CaseInsensitive() = %v, but Lstat(PROBE) says %v", got, want)
	}
	if got := entries(t, dir); len(got) != 1 || got[0] != "probe" {
		t.Errorf("the probe left %v", got)
	}

}

func TestProbeByEntry(t *testing.T) {
	r, dir := openRoot(t)
	if r.probeByEntry() {
		t.Error("probeByEntry on an empty folder = true")
	}
	writeOS(t, filepath.Join(dir, "123"), "") // no letters: tells nothing
	if r.probeByEntry() {
		t.Error("probeByEntry with no letters = true")
	}
	writeOS(t, filepath.Join(dir, "Probe"), "")
	_, err := os.Lstat(filepath.Join(dir, "pROBE"))
	if got, want := r.probeByEntry(), err == nil; got != want {
		t.Errorf("probeByEntry = %v, but Lstat(pROBE) says %v", got, want)
	}
}

func TestCaseConflict(t *testing.T) {
	r, dir := openRoot(t)
	if err := os.MkdirAll(filepath.Join(dir, "Docs/Sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeOS(t, filepath.Join(dir, "Docs/Sub/Report.TXT"), "x")

	if !r.CaseInsensitive() {
		// The real probe says case-sensitive: no name ever conflicts.
		if got, err := r.CaseConflict("docs/x"); got != "" || err != nil {
			t.Errorf("case-sensitive CaseConflict = %q, %v", got, err)
		}
	}
	// Exercise the lookup itself as a case-insensitive filesystem would.
	r.caseInsensitive = true
	for name, want := range map[string]string{
		"docs":                  "Docs",
		"docs/new.txt":          "Docs",
		"Docs/sub/x":            "Docs/Sub",
		"Docs/Sub/report.txt":   "Docs/Sub/Report.TXT",
		"Docs/Sub/Report.TXT":   "",
		"Docs/Sub/new.txt":      "",
		"Docs/Sub/Report.TXT/x": "",
		"Other/x":               "",
		"new":                   "",
	} {
		got, err := r.CaseConflict(name)
		if err != nil || got != want {
			t.Errorf("CaseConflict(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := r.CaseConflict("../x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("CaseConflict(../x) = %v", err)
	}
}

func TestCaseConflictManyEntries(t *testing.T) {
	// More entries than one ReadDir batch.
	r, dir := openRoot(t)
	for i := range 600 {
		writeOS(t, filepath.Join(dir, strings.Repeat("f", 1+i%3)+string(rune('a'+i%26))+strings.Repeat("0", i/78)), "")
	}
	writeOS(t, filepath.Join(dir, "ZZZ-last"), "")
	r.caseInsensitive = true
	if got, err := r.CaseConflict("zzz-LAST"); err != nil || got != "ZZZ-last" {
		t.Errorf("CaseConflict = %q, %v", got, err)
	}
	if _, err := r.CaseConflict("zzz-last/x"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CaseConflict under a file: %v", err)
	}
}
