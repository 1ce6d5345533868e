// Package home locates a node's home directory and manages the small files in
// it that are not the database or the identity: the API key and serve.json.
//
// A home holds cert.pem, key.pem (crypt), lockstep.db (storage/db), apikey
// and, while a daemon runs, serve.json. Files holding secrets are created
// with mode 0600 and every write is atomic (temp file, fsync, rename, fsync
// of the directory), so a crash never leaves a half-written file behind.
package home

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"lockstep/crypt"
)

// File names inside a home.
const (
	APIKeyFile   = "apikey"
	ServeFile    = "serve.json"
	DatabaseFile = "lockstep.db"
	// StoreKeyFile holds a receiver's store key (crypt.StoreKey) when
	// its folders are stored opaquely: rebuilding them from the store
	// alone needs it.
	StoreKeyFile = "store.key"
)

// ErrNoDaemon means no daemon is running for a home.
var ErrNoDaemon = errors.New("no lockstep daemon is running")

// Resolve returns the home directory: flag if set, else $LOCKSTEP_HOME, else
// $XDG_STATE_HOME/lockstep, else ~/.local/state/lockstep. The result is
// absolute.
func Resolve(flag string) (string, error) {
	dir := flag
	if dir == "" {
		dir = os.Getenv("LOCKSTEP_HOME")
	}
	if dir == "" {
		if x := os.Getenv("XDG_STATE_HOME"); x != "" {
			dir = filepath.Join(x, "lockstep")
		}
	}
	if dir == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the home directory: %w (set --home or LOCKSTEP_HOME)", err)
		}
		dir = filepath.Join(h, ".local", "state", "lockstep")
	}
	return filepath.Abs(dir)
}

// Ensure creates dir (mode 0700) if it is missing.
func Ensure(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating home: %w", err)
	}
	return nil
}

// LoadOrCreateAPIKey returns the home's API key, creating a random one if the
// file does not exist yet.
func LoadOrCreateAPIKey(dir string) (string, error) {
	key, err := LoadAPIKey(dir)
	if err == nil {
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	key = base64.RawURLEncoding.EncodeToString(b[:])
	if err := WriteFileAtomic(filepath.Join(dir, APIKeyFile), []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing API key: %w", err)
	}
	return key, nil
}

// LoadAPIKey reads the home's API key.
func LoadAPIKey(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, APIKeyFile))
	if err != nil {
		return "", fmt.Errorf("reading API key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("API key file %s is empty", filepath.Join(dir, APIKeyFile))
	}
	return key, nil
}

// ServeInfo is the content of serve.json, written once a daemon is ready.
type ServeInfo struct {
	DeviceID  string   `json:"deviceID"`
	Listen    []string `json:"listen"`
	GUI       string   `json:"gui,omitempty"`
	PID       int      `json:"pid"`
	Discovery string   `json:"discovery,omitempty"`
	Relay     string   `json:"relay,omitempty"`
}

// WriteServeInfo atomically writes serve.json.
func WriteServeInfo(dir string, info ServeInfo) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, ServeFile), append(b, '\n'), 0o600)
}

// ReadServeInfo reads serve.json. It returns ErrNoDaemon when the file is
// missing.
func ReadServeInfo(dir string) (ServeInfo, error) {
	var info ServeInfo
	b, err := os.ReadFile(filepath.Join(dir, ServeFile))
	if errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("%w for home %s", ErrNoDaemon, dir)
	}
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("reading %s: %w", ServeFile, err)
	}
	return info, nil
}

// RemoveServeInfo deletes serve.json; a missing file is not an error.
func RemoveServeInfo(dir string) error {
	err := os.Remove(filepath.Join(dir, ServeFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// WriteFileAtomic writes data to path through a temp file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory, so
// readers see the old or the new content, never a mix.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// LoadStoreKey returns the home's store key; ok is false when it has none.
func LoadStoreKey(dir string) (key crypt.StoreKey, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, StoreKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return crypt.StoreKey{}, false, nil
	}
	if err != nil {
		return crypt.StoreKey{}, false, fmt.Errorf("reading the store key: %w", err)
	}
	key, err = crypt.ParseStoreKey(strings.TrimSpace(string(b)))
	if err != nil {
		return crypt.StoreKey{}, false, fmt.Errorf("%s: %w", filepath.Join(dir, StoreKeyFile), err)
	}
	return key, true, nil
}

// LoadOrCreateStoreKey returns the home's store key, making a random one
// first if it has none.
func LoadOrCreateStoreKey(dir string) (crypt.StoreKey, error) {
	key, ok, err := LoadStoreKey(dir)
	if err != nil || ok {
		return key, err
	}
	if key, err = crypt.NewStoreKey(); err != nil {
		return crypt.StoreKey{}, err
	}
	if err := WriteFileAtomic(filepath.Join(dir, StoreKeyFile), []byte(key.String()+"\n"), 0o600); err != nil {
		return crypt.StoreKey{}, fmt.Errorf("writing the store key: %w", err)
	}
	return key, nil
}
