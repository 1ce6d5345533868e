package engine

import (
	"testing"
	"time"

	"lockstep/crypt"
)

func TestConflictName(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id := crypt.ShortID(0x0123456789abcdef)
	cases := map[string]string{
		"doc.txt":      "doc.sync-conflict-20260102-030405-" + id.String() + ".txt",
		"dir/a.tar.gz": "dir/a.tar.sync-conflict-20260102-030405-" + id.String() + ".gz",
		".bashrc":      ".bashrc.sync-conflict-20260102-030405-" + id.String(),
		"noext":        "noext.sync-conflict-20260102-030405-" + id.String(),
		"d.dir/noext":  "d.dir/noext.sync-conflict-20260102-030405-" + id.String(),
	}
	for in, want := range cases {
		if got := conflictName(in, id, at, 1); got != want {
			t.Errorf("conflictName(%q) = %q, want %q", in, got, want)
		}
	}
}
