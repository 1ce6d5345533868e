package fsys

import (
	"errors"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

var hostileNames = []struct {
	name, why string
}{
	{"", "empty"},
	{"../x", "parent"},
	{"..", "parent alone"},
	{".", "folder itself"},
	{"/etc/x", "absolute"},
	{"/", "root"},
	{"a/../../x", "escape through parent"},
	{"a/..", "trailing parent"},
	{"a/./b", "dot component"},
	{"./a", "leading dot"},
	{"a//b", "empty component"},
	{"a/", "trailing slash"},
	{"x\x00y", "NUL"},
	{"a\xffb", "invalid UTF-8"},
	{"\xc3", "truncated UTF-8"},
	{"e\u0301", "NFD"},
	{"dir/cafe\u0301.txt", "NFD deep"},
	{".lockstep", "internal dir"},
	{".lockstep/versions/x", "inside internal dir"},
	{".LockStep/versions/x", "internal dir in other case"},
	{"a/.lockstep/x", "nested internal dir"},
	{".lockstep-tmp-123", "temp"},
	{"a/.lockstep-tmp-123", "temp deep"},
	{".LOCKSTEP-TMP-123", "temp in other case"},
	{".lockstep-tmp-", "bare temp prefix"},
	{".loc\u212astep-tmp-1", "temp with Kelvin sign"},
	{".loc\u212astep", "internal dir with Kelvin sign"},
	{`a\b`, "backslash"},
	{`\x`, "leading backslash"},
	{strings.Repeat("x", 256), "256-byte component"},
	{"a/" + strings.Repeat("é", 128), "256-byte unicode component"},
}

func TestValidNameRejects(t *testing.T) {
	for _, tc := range hostileNames {
		err := ValidName(tc.name)
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidName(%q) (%s) = %v, want ErrInvalidName", tc.name, tc.why, err)
		}
	}
}

func TestValidNameAccepts(t *testing.T) {
	for _, name := range []string{
		"a",
		"dir/file.txt",
		"with space/ and more .txt",
		" leading and trailing ",
		"日本語/ファイル.txt",
		"caf\u00e9",
		".hidden",
		"..double",
		"trailing..",
		"...",
		".lockstepx",
		"a/.lockstep-tmp",
		"x.lockstep-tmp-1",
		"emoji 🎉",
		strings.Repeat("x", 255),
		strings.Repeat("a/", 100) + "b",
	} {
		if err := ValidName(name); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", name, err)
		}
		if err := checkPath(name, false); err != nil {
			t.Errorf("checkPath(%q) = %v, want nil", name, err)
		}
	}
}

// longName builds a valid name of exactly n bytes.
func longName(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strings.Repeat("x", min(200, n-b.Len())))
	}
	s := b.String()
	if strings.HasSuffix(s, "/") {
		s = s[:len(s)-1] + "y"
	}
	return s
}

func TestValidNameLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{strings.Repeat("c", MaxComponent-1), true},
		{strings.Repeat("c", MaxComponent), true},
		{strings.Repeat("c", MaxComponent+1), false},
		{"d/" + strings.Repeat("c", MaxComponent) + "/e", true},
		{"d/" + strings.Repeat("c", MaxComponent+1) + "/e", false},
		{longName(MaxName - 1), true},
		{longName(MaxName), true},
		{longName(MaxName + 1), false},
	} {
		err := ValidName(tc.name)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidName)) {
			t.Errorf("ValidName(%d bytes) = %v, want ok=%v", len(tc.name), err, tc.ok)
		}
	}
	if n := len(longName(MaxName + 1)); n != MaxName+1 {
		t.Fatalf("longName built %d bytes", n)
	}
}

func TestValidNameErrorSaysWhy(t *testing.T) {
	err := ValidName("a/../b")
	if err == nil || !strings.Contains(err.Error(), `".."`) {
		t.Errorf("error %v does not name the problem", err)
	}
	err = ValidName(strings.Repeat("y", 5000))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("error for a 5000-byte name is %d bytes long", len(err.Error()))
	}
}

func TestIsTemp(t *testing.T) {
	for base, want := range map[string]bool{
		".lockstep-tmp-0123abcd": true,
		".lockstep-tmp-":         true,
		".lockstep-tmp":          false,
		".lockstep":              false,
		"x.lockstep-tmp-1":       false,
		"file.txt":               false,
	} {
		if got := IsTemp(base); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", base, got, want)
		}
	}
}

func TestCheckPath(t *testing.T) {
	for _, name := range []string{".lockstep/versions/x", ".lockstep-tmp-1", "a/b", "e\u0301", "a\xff"} {
		if err := checkPath(name, false); err != nil {
			t.Errorf("checkPath(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", "/a", "../a", "a/..", "a//b", "a/./b", "a/", "a\x00", `a\b`, "."} {
		if err := checkPath(name, false); !errors.Is(err, ErrInvalidName) {
			t.Errorf("checkPath(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	if err := checkPath(".", true); err != nil {
		t.Errorf(`checkPath(".", true) = %v`, err)
	}
}

func FuzzValidName(f *testing.F) {
	for _, tc := range hostileNames {
		f.Add(tc.name)
	}
	for _, s := range []string{"a", "dir/file.txt", "日本語/x", ".hidden", "a/b/c/d", "caf\u00e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidName(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("ValidName(%q) = %v, not ErrInvalidName", name, err)
			}
			return
		}
		switch {
		case !utf8.ValidString(name):
			t.Fatalf("accepted invalid UTF-8 %q", name)
		case !norm.NFC.IsNormalString(name):
			t.Fatalf("accepted non-NFC %q", name)
		case path.Clean(name) != name:
			t.Fatalf("accepted %q, cleans to %q", name, path.Clean(name))
		case path.IsAbs(name) || len(name) > MaxName:
			t.Fatalf("accepted %q", name)
		case strings.ContainsAny(name, "\x00\\"):
			t.Fatalf("accepted %q with NUL or backslash", name)
		}
		for c := range strings.SplitSeq(name, "/") {
			if c == ".." || c == "." || c == "" || len(c) > MaxComponent ||
				strings.EqualFold(c, InternalDir) || IsTemp(strings.ToLower(c)) {
				t.Fatalf("accepted %q with component %q", name, c)
			}
		}
		if err := checkPath(name, false); err != nil {
			t.Fatalf("ValidName accepts %q but the FS refuses it: %v", name, err)
		}
	})
}
