package main

import (
	"strings"
	"testing"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain name.txt":   "plain name.txt",
		"naïve/日本.md":      "naïve/日本.md",
		"a\x1b[31mred":     `"a\x1b[31mred"`,
		"line\nbreak":      `"line\nbreak"`,
		"bell\a and \x7f":  `"bell\a and \x7f"`,
		"c1 \u009b2J here": `"c1 \u009b2J here"`,
	} {
		got := printable(in)
		if got != want {
			t.Errorf("printable(%q) = %s, want %s", in, got, want)
		}
		if strings.ContainsAny(got, "\x1b\n\a\x7f\u009b") {
			t.Errorf("printable(%q) = %q still holds a control character", in, got)
		}
	}
}

func TestEscapeControls(t *testing.T) {
	got := escapeControls("pulling b\x1b[2Jrefused: no such file")
	if want := `pulling b\x1b[2Jrefused: no such file`; got != want {
		t.Fatalf("escapeControls = %s, want %s", got, want)
	}
}
