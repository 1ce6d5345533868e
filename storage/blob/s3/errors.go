package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// Misconfigurations New reports. Each error New returns for one of them
// matches the sentinel with errors.Is and still wraps what the server or
// the network said (a minio.ErrorResponse, a *tls.RecordHeaderError ...).
// None of them goes away by retrying.
var (
	// ErrNoBucket means the configured bucket does not exist (and
	// Config.CreateBucket was not set).
	ErrNoBucket = errors.New("s3 bucket does not exist")
	// ErrNoKeys means no credential source gave both keys.
	ErrNoKeys = errors.New("no S3 keys found")
	// ErrKeysRefused means the server does not know the access key, or
	// the secret key does not match it, or a session token expired.
	ErrKeysRefused = errors.New("the S3 keys were refused")
	// ErrAccessDenied means the server knows the keys but does not let
	// them use the bucket.
	ErrAccessDenied = errors.New("the S3 keys may not use the bucket")
	// ErrWrongRegion means requests were signed for a region the server
	// does not serve the bucket in.
	ErrWrongRegion = errors.New("the S3 region is wrong")
	// ErrClockSkew means the server refused a request as signed too far
	// from its own time.
	ErrClockSkew = errors.New("this machine's clock differs from the server's")
	// ErrUnknownAuthority means the server's certificate is signed by an
	// authority neither the system nor Config.CAFile trusts.
	ErrUnknownAuthority = errors.New("the S3 server's certificate is signed by an unknown authority")
	// ErrCertificate means the server's certificate was refused for
	// another reason: expired, or for other names.
	ErrCertificate = errors.New("the S3 server's certificate is not valid")
	// ErrNotTLS means a TLS handshake was answered with plain HTTP.
	ErrNotTLS = errors.New("the S3 server does not speak TLS (HTTPS)")
	// ErrNeedsTLS means a plain HTTP request reached an HTTPS server.
	ErrNeedsTLS = errors.New("the S3 server speaks only HTTPS")
	// ErrUnreachable means no connection could be made: refused, or the
	// host name does not resolve.
	ErrUnreachable = errors.New("the S3 server cannot be reached")
	// ErrBadCAFile means Config.CAFile cannot be read or holds no PEM
	// certificate.
	ErrBadCAFile = errors.New("the S3 CA file is not usable")
)

// wantRegion finds the region an error message says the server expects,
// as AWS ("... is wrong; expecting 'eu-west-1'") and minio-go ("expecting
// region ‘eu-west-1’") write it.
var wantRegion = regexp.MustCompile(`expecting (?:region )?['‘"]([a-zA-Z0-9-]+)['’"]`)

// classify returns err wrapped with the sentinel of the misconfiguration
// it shows, or err unchanged when it shows none. keySource names where
// the keys came from, for ErrKeysRefused; region is the one requests were
// signed for ("" when the server was asked).
func classify(err error, keySource, region string) error {
	if err == nil {
		return nil
	}
	from := ""
	if keySource != "" {
		from = " (from " + keySource + ")"
	}
	var resp minio.ErrorResponse
	errors.As(err, &resp)
	switch resp.Code {
	case minio.InvalidAccessKeyID, "XAdminUserNotFound": // the latter is versitygw's
		return fmt.Errorf("%w: the server does not know the access key%s: %w", ErrKeysRefused, from, err)
	case minio.SignatureDoesNotMatch:
		return fmt.Errorf("%w: the secret key does not match the access key%s: %w", ErrKeysRefused, from, err)
	case "InvalidToken", "ExpiredToken", "TokenRefreshRequired", "InvalidClientTokenId":
		return fmt.Errorf("%w: the session token%s is not valid: %w", ErrKeysRefused, from, err)
	case minio.AccessDenied, "AllAccessDisabled":
		// AWS denies a request signed for another region, and says
		// where the bucket is.
		if resp.Region == "" || resp.Region == region {
			return fmt.Errorf("%w%s: %w", ErrAccessDenied, from, err)
		}
		return fmt.Errorf("%w%s: %w", ErrWrongRegion, wants(err), err)
	case minio.AuthorizationHeaderMalformed, minio.InvalidRegion, "IllegalLocationConstraintException":
		return fmt.Errorf("%w%s: %w", ErrWrongRegion, wants(err), err)
	case minio.RequestTimeTooSkewed:
		return fmt.Errorf("%w: %w", ErrClockSkew, err)
	case minio.NoSuchBucket:
		return fmt.Errorf("%w: %w", ErrNoBucket, err)
	}
	if resp.StatusCode == http.StatusBadRequest && strings.Contains(resp.Message, "HTTP request to an HTTPS server") {
		return fmt.Errorf("%w: %w", ErrNeedsTLS, err)
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		certErr   *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		dnsErr    *net.DNSError
	)
	switch {
	case errors.As(err, &unknownCA):
		return fmt.Errorf("%w: %w", ErrUnknownAuthority, err)
	case errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &certErr):
		return fmt.Errorf("%w: %w", ErrCertificate, err)
	case errors.As(err, &record), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"): // net/http's words
		return fmt.Errorf("%w: %w", ErrNotTLS, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: nothing listens there: %w", ErrUnreachable, err)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return fmt.Errorf("%w: no such host: %w", ErrUnreachable, err)
	}
	return err
}

// speaksTLS reports whether a TLS handshake with endpoint succeeds, its
// certificate unchecked: asked only to explain why plain HTTP failed.
func speaksTLS(ctx context.Context, endpoint string) bool {
	ctx, cancel := context.WithTimeout(ctx, tlsProbeTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}}
	conn, err := d.DialContext(ctx, "tcp", endpoint)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

const tlsProbeTimeout = 5 * time.Second

// wants says which region the server wants, if it said so.
func wants(err error) string {
	if r := WantedRegion(err); r != "" {
		return fmt.Sprintf(": the server wants %q", r)
	}
	return ""
}

// WantedRegion returns the region an S3 error says the server wants, or
// "" when it says none.
func WantedRegion(err error) string {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return ""
	}
	if resp.Region != "" {
		return resp.Region
	}
	if m := wantRegion.FindStringSubmatch(resp.Message); m != nil {
		return m[1]
	}
	return ""
}
