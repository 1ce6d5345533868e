package home

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestResolveOrder(t *testing.T) {
	t.Setenv("LOCKSTEP_HOME", "/tmp/from-env")
	t.Setenv("XDG_STATE_HOME", "/tmp/xdg")
	if got, _ := Resolve("/tmp/flag"); got != "/tmp/flag" {
		t.Errorf("flag: got %q", got)
	}
	if got, _ := Resolve(""); got != "/tmp/from-env" {
		t.Errorf("env: got %q", got)
	}
	t.Setenv("LOCKSTEP_HOME", "")
	if got, _ := Resolve(""); got != "/tmp/xdg/lockstep" {
		t.Errorf("xdg: got %q", got)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/tmp/h")
	if got, _ := Resolve(""); got != "/tmp/h/.local/state/lockstep" {
		t.Errorf("default: got %q", got)
	}
	rel, _ := Resolve("rel")
	if !filepath.IsAbs(rel) {
		t.Errorf("relative flag not made absolute: %q", rel)
	}
}

func TestAPIKeyStableAndPrivate(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadOrCreateAPIKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateAPIKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k1 != k2 || len(k1) < 40 {
		t.Fatalf("keys %q and %q", k1, k2)
	}
	st, err := os.Stat(filepath.Join(dir, APIKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("apikey mode %v, want 0600", st.Mode().Perm())
	}
	if err := os.WriteFile(filepath.Join(dir, APIKeyFile), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAPIKey(dir); err == nil {
		t.Error("empty API key file accepted")
	}
}

func TestServeInfoLifecycle(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadServeInfo(dir); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("missing serve.json: got %v, want ErrNoDaemon", err)
	}
	want := ServeInfo{DeviceID: "X", Listen: []string{"tcp://127.0.0.1:1"}, GUI: "http://127.0.0.1:2", PID: 42}
	if err := WriteServeInfo(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadServeInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.DeviceID != want.DeviceID || got.GUI != want.GUI || got.PID != 42 || len(got.Listen) != 1 {
		t.Fatalf("got %+v", got)
	}
	if err := RemoveServeInfo(dir); err != nil {
		t.Fatal(err)
	}
	if err := RemoveServeInfo(dir); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("left files behind: %v", entries)
	}
}

func TestStoreKeyFile(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := LoadStoreKey(dir); ok || err != nil {
		t.Fatalf("a home without a store key: ok %v, %v", ok, err)
	}
	k, err := LoadOrCreateStoreKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, StoreKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("store key file: %v, %v", fi, err)
	}
	again, err := LoadOrCreateStoreKey(dir)
	if err != nil || again != k {
		t.Fatal("a second LoadOrCreateStoreKey made another key")
	}
	if err := os.WriteFile(filepath.Join(dir, StoreKeyFile), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadStoreKey(dir); err == nil {
		t.Fatal("a damaged store key file loads")
	}
}
