package scan

import (
	"errors"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"lockstep/sync/fsys"
)

// FuzzParseIgnore: any input parses or fails with a *PatternError, and
// Match (one pass over the name per pattern) agrees with deciding each
// parent directory and the name separately.
func FuzzParseIgnore(f *testing.F) {
	for _, c := range ignoreCases {
		f.Add(c.patterns, c.name, c.isDir)
	}
	f.Add("[", "a", false)
	f.Add("\\", "a", false)
	f.Add("**/**/**/a", "a/a/a/a", true)
	f.Add("!/a/**\n#x\n\\#y \\ ", "a/b", false)
	f.Fuzz(func(t *testing.T, text, name string, isDir bool) {
		m, err := ParseIgnore(strings.NewReader(text))
		if err != nil {
			var pe *PatternError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPattern) || pe.Line < 1 {
				t.Fatalf("ParseIgnore(%q) = %v, not a *PatternError", text, err)
			}
			return
		}
		got := m.Match(name, isDir)
		want := m.matchOne(name, isDir)
		for i := 0; i < len(name); i++ {
			if name[i] == '/' && m.matchOne(name[:i], true) {
				want = true
			}
		}
		if got != want {
			t.Fatalf("patterns %q: Match(%q, %v) = %v, per parent %v", text, name, isDir, got, want)
		}
	})
}

// FuzzGlob compares the automaton with path.Match on the patterns both
// understand (no classes, no "**").
func FuzzGlob(f *testing.F) {
	f.Add("*.txt", "a.txt")
	f.Add("a*b*c", "aXbYc")
	f.Add("a?c", "a/c")
	f.Add("\\*x", "*x")
	f.Add("*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	f.Add("a/*/c", "a/b/c")
	f.Fuzz(func(t *testing.T, pattern, subject string) {
		g, why := compileGlob(pattern)
		if why != "" || !utf8.ValidString(pattern) || strings.Contains(pattern, "**") || strings.Contains(pattern, "[") {
			return
		}
		want, err := path.Match(pattern, subject)
		if err != nil {
			return
		}
		if got := g.match(subject); got != want {
			t.Fatalf("glob %q on %q = %v, path.Match = %v", pattern, subject, got, want)
		}
	})
}

// FuzzIgnoreLiteral: a valid name, escaped and anchored, is a pattern that
// ignores exactly that name (and what is under it), and a later negation
// of it re-includes it.
func FuzzIgnoreLiteral(f *testing.F) {
	f.Add("a.txt")
	f.Add("dir/*?[x]!#")
	f.Add("trailing space ")
	f.Add("#!x/ é")
	f.Fuzz(func(t *testing.T, name string) {
		if fsys.ValidName(name) != nil || strings.ContainsAny(name, "\r\n") {
			return
		}
		var b strings.Builder
		b.WriteByte('/')
		for _, r := range name {
			if strings.ContainsRune(`\*?[! #`, r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		pat := b.String()
		if len(pat) > MaxLineLen {
			return
		}
		m, err := ParseIgnore(strings.NewReader(pat))
		if err != nil {
			t.Fatalf("ParseIgnore(%q): %v", pat, err)
		}
		if !m.Match(name, false) || !m.Match(name+"/x", false) {
			t.Fatalf("%q does not match %q", pat, name)
		}
		if m.Match(name+"x", false) || m.Match("x"+name, false) || m.matchOne("d/"+name, false) {
			t.Fatalf("%q matches more than %q", pat, name)
		}
		m, err = ParseIgnore(strings.NewReader("*\n!" + pat))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(name, "/") && m.Match(name, false) {
			t.Fatalf("negated %q still ignores %q", pat, name)
		}
	})
}
