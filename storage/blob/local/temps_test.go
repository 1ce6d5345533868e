package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"lockstep/storage/blob"
)

// TestTemps: Temps finds the temporary files below a prefix's directory,
// in shard directories too, and nothing else; a missing directory has
// none; fn's error comes back unchanged.
func TestTemps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	putString(t, s, "r/a/c/abcdef", "chunk")
	putString(t, s, "r/b/meta.json", "{}")
	for _, p := range []string{"r/a/c/ab/.tmp-1", "r/a/.tmp-2", "r/b/.tmp-3"} {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), []byte("part"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	list := func(prefix string) []string {
		var got []string
		if err := s.Temps(ctx, prefix, func(i blob.Info) error {
			if i.Size != 4 || i.ModTime.IsZero() {
				t.Errorf("%s: %+v", i.Key, i)
			}
			got = append(got, i.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	if got := list("r/a/"); !slices.Equal(got, []string{"r/a/.tmp-2", "r/a/c/ab/.tmp-1"}) {
		t.Fatalf("Temps(r/a/) = %q", got)
	}
	if got := list(""); len(got) != 3 {
		t.Fatalf("Temps(\"\") = %q", got)
	}
	if got := list("r/none/"); len(got) != 0 {
		t.Fatalf("Temps of a missing directory = %q", got)
	}
	stop := errors.New("stop")
	if err := s.Temps(ctx, "r/", func(blob.Info) error { return stop }); err != stop {
		t.Fatalf("fn's error came back as %v", err)
	}
	if err := s.Temps(ctx, "r/a", func(blob.Info) error { return nil }); !errors.Is(err, blob.ErrInvalidKey) {
		t.Fatalf("prefix without a slash: %v", err)
	}
}
