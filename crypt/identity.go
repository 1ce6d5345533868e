package crypt

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Identity file names inside the directory given to LoadIdentity.
const (
	CertFile = "cert.pem"
	KeyFile  = "key.pem"
)

// DefaultCommonName is the certificate common name when none is given.
const DefaultCommonName = "lockstep"

// certValidity is the lifetime of a new self-signed certificate. Peers do
// not check it (they pin the key), but other TLS tooling might.
const certValidity = 20 * 365 * 24 * time.Hour

// Identity is a node's Ed25519 key and self-signed certificate.
type Identity struct {
	// Certificate is ready for tls.Config.Certificates.
	Certificate tls.Certificate
	// Leaf is the parsed certificate.
	Leaf *x509.Certificate
	// ID is the device ID of Leaf's public key.
	ID DeviceID
}

// LoadIdentity reads dir/cert.pem and dir/key.pem. When both are absent the
// error wraps fs.ErrNotExist; when only one exists, or they are unusable, it
// wraps ErrIdentity.
func LoadIdentity(dir string) (*Identity, error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist):
		return nil, fmt.Errorf("loading identity: %w", certErr)
	case errors.Is(certErr, fs.ErrNotExist):
		return nil, fmt.Errorf("loading identity: %w: %s exists but %s is missing", ErrIdentity, keyPath, certPath)
	case errors.Is(keyErr, fs.ErrNotExist):
		return nil, fmt.Errorf("loading identity: %w: %s exists but %s is missing", ErrIdentity, certPath, keyPath)
	case certErr != nil:
		return nil, fmt.Errorf("loading identity: %w", certErr)
	case keyErr != nil:
		return nil, fmt.Errorf("loading identity: %w", keyErr)
	}
	id, err := identityFromPEM(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading identity from %s: %w", dir, err)
	}
	return id, nil
}

// LoadOrCreateIdentity loads the identity in dir (see LoadIdentity), or, if
// both files are missing, creates dir (0700) and a new identity with the
// given certificate common name (DefaultCommonName if empty). The key is
// written with mode 0600, each file atomically (temp file, fsync, rename,
// fsync of dir). If only one of the files exists the error wraps ErrIdentity
// and nothing is written. created reports whether a new identity was made.
// Two processes creating an identity in one dir at once is not supported.
func LoadOrCreateIdentity(dir, commonName string) (id *Identity, created bool, err error) {
	id, err = LoadIdentity(dir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return id, false, err
	}
	if commonName == "" {
		commonName = DefaultCommonName
	}
	certPEM, keyPEM, err := newSelfSigned(commonName, time.Now())
	if err != nil {
		return nil, false, fmt.Errorf("creating identity: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("creating identity: %w", err)
	}
	if err := writeAtomic(dir, KeyFile, keyPEM, 0o600); err != nil {
		return nil, false, fmt.Errorf("creating identity: %w", err)
	}
	if err := writeAtomic(dir, CertFile, certPEM, 0o644); err != nil {
		return nil, false, fmt.Errorf("creating identity: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, false, fmt.Errorf("creating identity: %w", err)
	}
	id, err = identityFromPEM(certPEM, keyPEM)
	if err != nil {
		return nil, false, fmt.Errorf("creating identity: %w", err)
	}
	return id, true, nil
}

// newSelfSigned returns a new Ed25519 key and a self-signed certificate for
// it, both PEM encoded.
func newSelfSigned(commonName string, now time.Time) (certPEM, keyPEM []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)), // positive, never zero
		Subject:               pkix.Name{CommonName: commonName},
		DNSNames:              []string{commonName},
		NotBefore:             now.Add(-24 * time.Hour).UTC().Truncate(time.Second),
		NotAfter:              now.Add(certValidity).UTC().Truncate(time.Second),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	return certPEM, keyPEM, nil
}

// identityFromPEM builds an Identity from a certificate and its key. The key
// must be Ed25519 and match the certificate.
func identityFromPEM(certPEM, keyPEM []byte) (*Identity, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIdentity, err)
		}
		cert.Leaf = leaf
	}
	if _, ok := cert.PrivateKey.(ed25519.PrivateKey); !ok {
		return nil, fmt.Errorf("%w: key is %T, want Ed25519", ErrIdentity, cert.PrivateKey)
	}
	return &Identity{Certificate: cert, Leaf: leaf, ID: DeviceIDFromCert(leaf)}, nil
}

// writeAtomic writes data to dir/name through a temporary file in dir that
// is fsynced, given perm, and renamed into place. The caller syncs dir.
func writeAtomic(dir, name string, data []byte, perm fs.FileMode) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// syncDir fsyncs a directory so that renames in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
