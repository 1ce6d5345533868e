package receiver

import (
	"bytes"
	"testing"
)

// TestIsDataKey: chunk bodies and packs are data; meta, logs, envelopes
// and anything else are not.
func TestIsDataKey(t *testing.T) {
	fk := folderKey(folderID)
	id := bytes.Repeat([]byte{0xab}, 32)
	for key, want := range map[string]bool{
		chunkKey(fk, id):       true,
		packKey(fk, id[:16]):   true,
		metaKey(fk):            false,
		logKey(fk, 1):          false,
		envelopeKey(fk, 1):     false,
		"r/" + fk + "/c/":      false,
		"r//c/ab":              false,
		"r/" + fk + "/c/ab/cd": false,
		"x/" + fk + "/c/ab":    false,
		"c/ab":                 false,
	} {
		if got := IsDataKey(key); got != want {
			t.Errorf("IsDataKey(%q) = %v, want %v", key, got, want)
		}
	}
}
