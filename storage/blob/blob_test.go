package blob_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"lockstep/storage/blob"
)

func TestErrorsMatchFS(t *testing.T) {
	for _, tc := range []struct{ err, target error }{
		{blob.ErrNotExist, fs.ErrNotExist},
		{blob.ErrExist, fs.ErrExist},
		{blob.ErrInvalidKey, fs.ErrInvalid},
	} {
		if !errors.Is(tc.err, tc.target) {
			t.Errorf("errors.Is(%v, %v) = false", tc.err, tc.target)
		}
	}
	if errors.Is(blob.ErrNotExist, fs.ErrExist) || errors.Is(blob.ErrExist, fs.ErrNotExist) {
		t.Error("ErrNotExist and ErrExist overlap")
	}
}

func TestValidKey(t *testing.T) {
	for key, want := range map[string]bool{
		"a": true, "a/b": true, "0": true, "a.b-c_d": true, "a/b.": true, "a/-": true,
		strings.Repeat("a", 255): true, strings.Repeat("a", 256): false,
		strings.Repeat("ab/", 341) + "x":  true,  // 1024 bytes
		strings.Repeat("ab/", 341) + "xy": false, // 1025 bytes
		"":                                false, "/": false, "/a": false, "a/": false, "a//b": false,
		".a": false, "a/.b": false, ".": false, "..": false, "../a": false,
		"A": false, "a b": false, "a\x00": false, "é": false, "a\\b": false, "a:b": false,
	} {
		err := blob.ValidKey(key)
		if (err == nil) != want {
			t.Errorf("ValidKey(%q) = %v, want valid %v", key, err, want)
		}
		if err != nil && !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("ValidKey(%q) = %v, not ErrInvalidKey", key, err)
		}
	}
}

func TestValidPrefix(t *testing.T) {
	for prefix, want := range map[string]bool{
		"": true, "a": true, "a/": true, "a/b": true, "a/b/": true, "ab": true,
		strings.Repeat("a", 1023) + "/": false, // no key can follow it
		strings.Repeat("ab/", 341):      true,  // 1023 bytes: "x" may follow
		strings.Repeat("a", 255):        true,
		"/":                             false, "/a": false, "a//": false, ".": false, "a/.": false, "A": false, "a b": false,
	} {
		if err := blob.ValidPrefix(prefix); (err == nil) != want {
			t.Errorf("ValidPrefix(%q) = %v, want valid %v", prefix, err, want)
		}
	}
}

// FuzzValidKey checks ValidKey against the rules written out plainly, and
// that every prefix of a valid key is a valid List prefix.
func FuzzValidKey(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "a//b", ".x", "A", "", "chunks/0123abcd", "a/b.", "x/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := blob.ValidKey(key)
		if (err == nil) != plainValid(key) {
			t.Fatalf("ValidKey(%q) = %v, plain rules say %v", key, err, plainValid(key))
		}
		if err != nil {
			return
		}
		for i := range len(key) + 1 {
			if perr := blob.ValidPrefix(key[:i]); perr != nil {
				t.Fatalf("prefix %q of valid key %q: %v", key[:i], key, perr)
			}
		}
		if !blob.ValidSegment(key[strings.LastIndexByte(key, '/')+1:]) {
			t.Fatalf("last segment of valid key %q is not a valid segment", key)
		}
	})
}

func plainValid(key string) bool {
	if len(key) == 0 || len(key) > 1024 {
		return false
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || len(seg) > 255 || seg[0] == '.' {
			return false
		}
		for _, r := range seg {
			if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789._-", r) {
				return false
			}
		}
	}
	return true
}
