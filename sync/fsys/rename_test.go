package fsys

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestRenameNoReplace(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for name, data := range map[string]string{"a": "A", "b": "B"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.RenameNoReplace("a", "b"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("onto an existing name: %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "b")); string(got) != "B" {
		t.Fatalf("b = %q after a refused rename", got)
	}
	if err := r.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.RenameNoReplace("a", "d/c"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "d", "c")); string(got) != "A" {
		t.Fatalf("d/c = %q", got)
	}
}

func TestExchange(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"a": "A", "d/b": "B"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err = r.Exchange("a", "d/b")
	if errors.Is(err, ErrNoExchange) {
		t.Skip("no atomic exchange on this file system")
	}
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a"))
	b, _ := os.ReadFile(filepath.Join(dir, "d", "b"))
	if string(a) != "B" || string(b) != "A" {
		t.Fatalf("after exchange a = %q, d/b = %q", a, b)
	}
	if err := r.Exchange("a", "missing"); err == nil || errors.Is(err, ErrNoExchange) {
		t.Fatalf("exchange with a missing name: %v", err)
	}
}
