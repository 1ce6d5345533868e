package crypt

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadOrCreateIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home", "nested")
	id, created, err := LoadOrCreateIdentity(dir, "laptop")
	if err != nil || !created {
		t.Fatalf("first call: created=%v err=%v", created, err)
	}
	if id.ID != DeviceIDFromCert(id.Leaf) || id.ID.IsZero() {
		t.Fatalf("ID %v does not match the certificate", id.ID)
	}
	if id.Leaf.Subject.CommonName != "laptop" {
		t.Errorf("CN = %q", id.Leaf.Subject.CommonName)
	}
	if _, ok := id.Leaf.PublicKey.(ed25519.PublicKey); !ok {
		t.Errorf("public key is %T, want Ed25519", id.Leaf.PublicKey)
	}
	if id.Leaf.NotAfter.Before(time.Now().Add(19 * 365 * 24 * time.Hour)) {
		t.Errorf("NotAfter = %v, want about 20 years", id.Leaf.NotAfter)
	}
	if id.Leaf.SerialNumber.Sign() <= 0 {
		t.Errorf("serial %v is not positive", id.Leaf.SerialNumber)
	}
	for name, want := range map[string]fs.FileMode{KeyFile: 0o600, CertFile: 0o644, ".": 0o700} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s mode = %v, want %v", name, got, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want cert.pem and key.pem only", len(entries))
	}

	again, created, err := LoadOrCreateIdentity(dir, "other name")
	if err != nil || created {
		t.Fatalf("second call: created=%v err=%v", created, err)
	}
	if again.ID != id.ID || again.Leaf.Subject.CommonName != "laptop" {
		t.Fatalf("reloaded %v %q, want %v laptop", again.ID, again.Leaf.Subject.CommonName, id.ID)
	}
	loaded, err := LoadIdentity(dir)
	if err != nil || loaded.ID != id.ID {
		t.Fatalf("LoadIdentity = %v, %v", loaded, err)
	}
}

func TestIdentityDefaultsAndUniqueness(t *testing.T) {
	a, _, err := LoadOrCreateIdentity(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := LoadOrCreateIdentity(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Leaf.Subject.CommonName != DefaultCommonName {
		t.Errorf("CN = %q, want %q", a.Leaf.Subject.CommonName, DefaultCommonName)
	}
	if a.ID == b.ID || a.Leaf.SerialNumber.Cmp(b.Leaf.SerialNumber) == 0 {
		t.Error("two new identities share an ID or serial")
	}
}

func TestLoadIdentityMissing(t *testing.T) {
	_, err := LoadIdentity(t.TempDir())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
	_, err = LoadIdentity(filepath.Join(t.TempDir(), "no such dir"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

// TestIdentityHalfPresent: one file without the other is an error, and
// nothing is created or overwritten.
func TestIdentityHalfPresent(t *testing.T) {
	src := t.TempDir()
	if _, _, err := LoadOrCreateIdentity(src, ""); err != nil {
		t.Fatal(err)
	}
	for _, present := range []string{CertFile, KeyFile} {
		t.Run(present, func(t *testing.T) {
			dir := t.TempDir()
			data, err := os.ReadFile(filepath.Join(src, present))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, present), data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, created, err := LoadOrCreateIdentity(dir, "")
			if !errors.Is(err, ErrIdentity) || errors.Is(err, fs.ErrNotExist) || created {
				t.Fatalf("created=%v err=%v, want ErrIdentity", created, err)
			}
			if _, err := LoadIdentity(dir); !errors.Is(err, ErrIdentity) || errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("LoadIdentity err = %v, want ErrIdentity", err)
			}
			after, err := os.ReadFile(filepath.Join(dir, present))
			if err != nil || !bytes.Equal(after, data) {
				t.Fatalf("%s changed: %v", present, err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Fatalf("dir holds %d entries, want 1", len(entries))
			}
		})
	}
}

func TestIdentityDamaged(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if _, _, err := LoadOrCreateIdentity(d, ""); err != nil {
			t.Fatal(err)
		}
	}
	read := func(dir, name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	shortDER := []byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n")
	ecCert, ecKey := ecdsaPair(t)
	for name, files := range map[string][2][]byte{
		"mismatched key": {read(a, CertFile), read(b, KeyFile)},
		"garbage key":    {read(a, CertFile), []byte("not PEM")},
		"garbage cert":   {[]byte("not PEM"), read(a, KeyFile)},
		"truncated key":  {read(a, CertFile), read(a, KeyFile)[:40]},
		"bad key DER":    {read(a, CertFile), shortDER},
		"ECDSA key":      {ecCert, ecKey},
		"empty files":    {nil, nil},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, CertFile), files[0], 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, KeyFile), files[1], 0o600); err != nil {
				t.Fatal(err)
			}
			if _, _, err := LoadOrCreateIdentity(dir, ""); !errors.Is(err, ErrIdentity) {
				t.Fatalf("err = %v, want ErrIdentity", err)
			}
		})
	}
}

func TestIdentityUnreadableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	_, _, err := LoadOrCreateIdentity(dir, "")
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want a permission error", err)
	}
}

// ecdsaPair returns a valid self-signed P-256 certificate and key: a usable
// TLS pair that is not an Ed25519 identity.
func ecdsaPair(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "ec"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k})
}
