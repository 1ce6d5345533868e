package web

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The console's HTTPS certificate: self-signed, created once in the home
// and kept, so that browsers and the CLI meet the same certificate every
// time. The CLI pins it: it trusts exactly the certificate in the home.

const (
	// CertFile and KeyFile are the console certificate and its key in the
	// home, PEM-encoded, mode 0600.
	CertFile = "gui-cert.pem"
	KeyFile  = "gui-key.pem"
	// certValidity is how long a new console certificate is valid.
	certValidity = 10 * 365 * 24 * time.Hour
	// certName is a name every console certificate carries; the pinned
	// client verifies it whatever address it dials.
	certName = "localhost"
)

// Errors of the console's HTTPS.
var (
	// ErrNeedsPassword: the console is to listen beyond loopback before
	// the admin password is set.
	ErrNeedsPassword = errors.New("the console listens beyond loopback only once its admin password is set: set it first with the console on loopback (serve --gui 127.0.0.1:PORT), through its page or 'lockstep console password --password-file F'")
	// ErrNoHome: a non-loopback console needs the home for its certificate.
	ErrNoHome = errors.New("the console needs the home directory to keep its HTTPS certificate")
	// ErrCertMismatch: the server showed a certificate other than the
	// home's.
	ErrCertMismatch = errors.New("the console's certificate is not the one in the home")
)

// isLoopback reports whether addr (HOST:PORT) binds loopback only.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// loadOrCreateCert returns the home's console certificate, creating it
// (and its key) first if either file is missing. bound is the IP the
// console listens on (nil or unspecified for every address).
func loadOrCreateCert(home string, bound net.IP) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(home, CertFile), filepath.Join(home, KeyFile)
	_, errC := os.Stat(certPath)
	_, errK := os.Stat(keyPath)
	if errors.Is(errC, os.ErrNotExist) || errors.Is(errK, os.ErrNotExist) {
		certPEM, keyPEM, err := newCert(bound, time.Now())
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("creating the console certificate: %w", err)
		}
		if err := writeFileAtomic(keyPath, keyPEM); err != nil {
			return tls.Certificate{}, fmt.Errorf("writing the console key: %w", err)
		}
		if err := writeFileAtomic(certPath, certPEM); err != nil {
			return tls.Certificate{}, fmt.Errorf("writing the console certificate: %w", err)
		}
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("loading the console certificate: %w", err)
	}
	return cert, nil
}

// newCert makes a self-signed ECDSA P-256 certificate valid for
// certValidity from now, for the host name, localhost, the loopback
// addresses and bound (when specified); it returns it and its key as PEM.
func newCert(bound net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	names := []string{certName}
	if h, err := os.Hostname(); err == nil && h != "" && h != certName {
		names = append(names, h)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if bound != nil && !bound.IsUnspecified() && !bound.IsLoopback() {
		ips = append(ips, bound)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "lockstep console", Organization: []string{"lockstep"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              names,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// writeFileAtomic writes data to path with mode 0600 through a temporary
// file in the same directory, synced and renamed into place.
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Fingerprint is the SHA-256 of a DER certificate, as colon-separated
// upper-case hex bytes (how browsers show it).
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

// CertFingerprint returns the Fingerprint of the console certificate in
// home.
func CertFingerprint(home string) (string, error) {
	cert, err := readCert(home)
	if err != nil {
		return "", err
	}
	return Fingerprint(cert.Raw), nil
}

// readCert parses the console certificate in home.
func readCert(home string) (*x509.Certificate, error) {
	b, err := os.ReadFile(filepath.Join(home, CertFile))
	if err != nil {
		return nil, fmt.Errorf("reading the console certificate: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("the console certificate %s is not PEM", CertFile)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the console certificate: %w", err)
	}
	return cert, nil
}

// pinnedTLS is a client TLS configuration that trusts cert alone: the
// chain must be exactly cert, verified as a root for certName, and the
// server must show these very bytes.
func pinnedTLS(cert *x509.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		ServerName: certName,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, cert.Raw) {
				return ErrCertMismatch
			}
			return nil
		},
	}
}
