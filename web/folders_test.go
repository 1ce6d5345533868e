package web

import "testing"

func TestOverlaps(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"/data/docs", "/data/docs", true},
		{"/data/docs", "/data/docs/sub", true},
		{"/data/docs/sub", "/data/docs", true},
		{"/data/docs", "/data/docs2", false},
		{"/data/docs2", "/data/docs", false},
		{"/data/a", "/data/b", false},
		{"/", "/anything", true},
		{"/data/..x", "/data/..x/y", true},
		{"/data/x", "/data/..x", false},
	}
	for _, c := range cases {
		if got := overlaps(c.a, c.b); got != c.want {
			t.Errorf("overlaps(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestFolderIDPattern(t *testing.T) {
	for _, ok := range []string{"docs", "a", "Photos-2024", "x.y_z", "0abc"} {
		if !folderIDPattern.MatchString(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", ".hidden", "-x", "a/b", "a b", "../x", string(make([]byte, 65))} {
		if folderIDPattern.MatchString(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
