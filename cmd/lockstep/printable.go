package main

import (
	"strconv"
	"strings"
	"unicode"
)

// printable returns s as it may go to a terminal: unchanged when it holds
// only printable characters, else quoted with every control character
// escaped. File names and errors come from peers, and a name with
// "\x1b[2J" in it must not clear the user's screen or fake output.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) < 0 {
		return s
	}
	return strconv.QuoteToGraphic(s)
}

// escapeControls is printable for text that is already a sentence (an
// error): each control character is escaped in place, without quotes.
func escapeControls(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) || r == ' ' {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToGraphic(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}
