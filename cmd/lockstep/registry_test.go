package main

import (
	"strings"
	"testing"
)

// TestAnnouncedName: a pending device's name, from its certificate, is
// kept fit to show.
func TestAnnouncedName(t *testing.T) {
	for in, want := range map[string]string{
		"laptop-b":                 "laptop-b",
		" spaced ":                 "spaced",
		"bell\x07\r\nname":         "bellname",
		"bad\xffutf8":              "badutf8",
		strings.Repeat("é", 40):    strings.Repeat("é", 32),
		"\u202eevil-right-to-left": "evil-right-to-left",
	} {
		if got := announcedName(in); got != want {
			t.Errorf("announcedName(%q) = %q, want %q", in, got, want)
		}
	}
}
