package scan

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
)

type ignoreCase struct {
	patterns string
	name     string
	isDir    bool
	want     bool
}

// ignoreCases follow git's behaviour (gitignore(5)); each was checked
// against `git check-ignore --no-index` when written. One deliberate
// difference: '?' and classes match one character, where git matches one
// byte (marked below).
var ignoreCases = []ignoreCase{
	// Base-name patterns match at any depth.
	{"*.o", "a.o", false, true},
	{"*.o", "dir/sub/a.o", false, true},
	{"*.o", "a.oo", false, false},
	{"*.o", "a.o/x", false, true}, // a directory called a.o is ignored with its contents
	{"foo", "foo", true, true},
	{"foo", "x/foo", false, true},
	{"foo", "foo/bar", false, true},
	{"foo", "foobar", false, false},
	{"foo", "xfoo", false, false},
	// Trailing slash: directories only.
	{"build/", "build", true, true},
	{"build/", "build", false, false},
	{"build/", "src/build", true, true},
	{"build/", "build/x.c", false, true},
	{"build/", "build2", true, false},
	// Anchoring: a leading or middle slash.
	{"/root.txt", "root.txt", false, true},
	{"/root.txt", "a/root.txt", false, false},
	{"doc/*.txt", "doc/a.txt", false, true},
	{"doc/*.txt", "doc/sub/a.txt", false, false},
	{"doc/*.txt", "x/doc/a.txt", false, false},
	{"/a*b", "axyb", false, true},
	{"/a*b", "a/xb", false, false},
	{"a?b", "a/b", false, false},
	// "**".
	{"**/foo", "foo", false, true},
	{"**/foo", "a/foo", false, true},
	{"**/foo", "a/b/foo", true, true},
	{"**/foo/bar", "foo/bar", false, true},
	{"**/foo/bar", "x/y/foo/bar", false, true},
	{"**/foo/bar", "x/foo/baz", false, false},
	{"abc/**", "abc/x", false, true},
	{"abc/**", "abc/x/y", false, true},
	{"abc/**", "abc", true, false},
	{"abc/**", "abcd/x", false, false},
	{"a/**/b", "a/b", false, true},
	{"a/**/b", "a/x/b", false, true},
	{"a/**/b", "a/x/y/b", false, true},
	{"a/**/b", "a/xb", false, false},
	{"a/**/b", "ab", false, false},
	{"**", "anything/at/all", false, true},
	{"/**", "x", false, true},
	{"a**b", "axxb", false, true}, // not at a slash: one '*'
	{"a**b", "ax/b", false, false},
	{"foo/**/", "foo/x", true, true},
	{"foo/**/", "foo/x", false, false},
	// Negation: the last match wins; parents cannot be re-included.
	{"*.log\n!important.log", "important.log", false, false},
	{"*.log\n!important.log", "x.log", false, true},
	{"!important.log\n*.log", "important.log", false, true},
	{"logs/\n!logs/keep", "logs/keep", false, true},
	{"logs/*\n!logs/keep", "logs/keep", false, false},
	{"logs/*\n!logs/keep", "logs/other", false, true},
	{"/*\n!/src", "src/a.go", false, false},
	{"/*\n!/src", "doc/a.md", false, true},
	// Comments, escapes, spaces.
	{"#comment", "#comment", false, false},
	{"\\#hash", "#hash", false, true},
	{"\\!bang", "!bang", false, true},
	{"trail\\ ", "trail ", false, true},
	{"trail  ", "trail", false, true},
	{"trail  ", "trail ", false, false},
	{"a\\*b", "a*b", false, true},
	{"a\\*b", "axb", false, false},
	{"\n\n  \n*.tmp\r\n", "x.tmp", false, true},
	// Single-character wildcards and classes.
	{"?.txt", "a.txt", false, true},
	{"?.txt", "ab.txt", false, false},
	{"?.txt", "é.txt", false, true}, // git: false ('?' is one byte there)
	{"[abc].c", "a.c", false, true},
	{"[abc].c", "d.c", false, false},
	{"[!abc].c", "d.c", false, true},
	{"[!abc].c", "a.c", false, false},
	{"[^abc].c", "d.c", false, true},
	{"[a-c]x", "bx", false, true},
	{"[a-c]x", "dx", false, false},
	{"[]]x", "]x", false, true},
	{"[a-]x", "-x", false, true},
	{"x[!a]y", "x/y", false, false},
	// Case matters.
	{"*.JPG", "a.jpg", false, false},
}

func TestMatcherTable(t *testing.T) {
	for _, c := range ignoreCases {
		m, err := ParseIgnore(strings.NewReader(c.patterns))
		if err != nil {
			t.Fatalf("ParseIgnore(%q): %v", c.patterns, err)
		}
		if got := m.Match(c.name, c.isDir); got != c.want {
			t.Errorf("patterns %q: Match(%q, dir=%v) = %v, want %v", c.patterns, c.name, c.isDir, got, c.want)
		}
	}
}

func TestMatcherBuiltin(t *testing.T) {
	parsed, err := ParseIgnore(strings.NewReader("!.lockstep\n!*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Matcher{nil, {}, parsed} {
		for name, want := range map[string]bool{
			".lockstep":                true,
			".lockstep/versions/a.txt": true,
			"a/.lockstep":              true,
			".lockstep-tmp-0123":       true,
			"a/b/.lockstep-tmp-x":      true,
			".lockstepignore":          false,
			".lockstepx":               false,
			"a/.lockstep-tm":           false,
		} {
			if got := m.Match(name, false); got != want {
				t.Errorf("matcher %p: Match(%q) = %v, want %v", m, name, got, want)
			}
		}
	}
}

func TestParseIgnoreErrors(t *testing.T) {
	cases := []struct {
		text string
		line int
	}{
		{"ok\n[abc", 2},
		{"a\n\nb\\", 3},
		{"!", 1},
		{"/", 1},
		{"x\n[z-a]", 2},
		{"bad\xffutf8", 1},
		{"a\x00b", 1},
		{"*.o\n" + strings.Repeat("x", MaxLineLen+1), 2},
		{strings.Repeat("*a", MaxWildcards+1), 1},
	}
	for _, c := range cases {
		_, err := ParseIgnore(strings.NewReader(c.text))
		var pe *PatternError
		if !errors.As(err, &pe) || !errors.Is(err, ErrPattern) {
			t.Errorf("ParseIgnore(%.20q) = %v, want a *PatternError", c.text, err)
			continue
		}
		if pe.Line != c.line || !strings.Contains(err.Error(), fmt.Sprintf("line %d", c.line)) {
			t.Errorf("ParseIgnore(%.20q): error %q, want line %d", c.text, err, c.line)
		}
	}
	// A read error is not a pattern error.
	_, err := ParseIgnore(iotest.ErrReader(errors.New("disk on fire")))
	if err == nil || errors.Is(err, ErrPattern) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("ParseIgnore(failing reader) = %v", err)
	}
}

func TestParseIgnoreLimits(t *testing.T) {
	// Line length n-1, n, n+1, with and without "\r\n".
	for _, n := range []int{MaxLineLen - 1, MaxLineLen, MaxLineLen + 1} {
		for _, eol := range []string{"", "\n", "\r\n"} {
			line := strings.Repeat("a", n)
			m, err := ParseIgnore(strings.NewReader(line + eol))
			if ok := n <= MaxLineLen; (err == nil) != ok {
				t.Errorf("line of %d bytes + %q: err = %v, want ok=%v", n, eol, err, ok)
			}
			if err == nil && !m.Match(line, false) {
				t.Errorf("line of %d bytes does not match itself", n)
			}
		}
	}
	// Wildcards n-1, n, n+1.
	for _, n := range []int{MaxWildcards - 1, MaxWildcards, MaxWildcards + 1} {
		_, err := ParseIgnore(strings.NewReader(strings.Repeat("?", n)))
		if ok := n <= MaxWildcards; (err == nil) != ok {
			t.Errorf("%d wildcards: err = %v, want ok=%v", n, err, ok)
		}
	}
	// Patterns n-1, n, n+1; comments and blank lines do not count.
	for _, n := range []int{MaxPatterns - 1, MaxPatterns, MaxPatterns + 1} {
		text := "# header\n\n" + strings.Repeat("x\n", n)
		_, err := ParseIgnore(strings.NewReader(text))
		if ok := n <= MaxPatterns; (err == nil) != ok {
			t.Errorf("%d patterns: err = %v, want ok=%v", n, err, ok)
		}
	}
}

func TestParseIgnoreNFC(t *testing.T) {
	// A pattern typed in NFD matches the NFC name.
	m, err := ParseIgnore(strings.NewReader("caf" + "e\u0301" + ".txt\n\uFEFF"))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Match("café.txt", false) {
		t.Error("NFD pattern does not match NFC name")
	}
	// A byte-order mark starts the first line only.
	m, err = ParseIgnore(strings.NewReader("\uFEFFa.txt"))
	if err != nil || !m.Match("a.txt", false) {
		t.Errorf("BOM: err %v, match %v", err, err == nil && m.Match("a.txt", false))
	}
}

// TestMatchPathological checks that patterns built to make backtracking
// matchers explode cost linear time: with a backtracking matcher the name
// below takes ~2^30 steps.
func TestMatchPathological(t *testing.T) {
	pat := "/" + strings.Repeat("**/a*", 30) + "b"
	m, err := ParseIgnore(strings.NewReader(pat))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("a/", 40) + strings.Repeat("a", 40)
	if m.Match(name, false) {
		t.Errorf("%q matched %q", pat, name)
	}
	if !m.Match(name+"b", false) {
		t.Errorf("%q did not match %q", pat, name+"b")
	}
}
