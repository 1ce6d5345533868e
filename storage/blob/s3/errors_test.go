package s3

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestClassify maps the errors servers and the network give for each
// misconfiguration to its sentinel, keeping the original error and saying
// what to know (the key source, the region the server wants).
func TestClassify(t *testing.T) {
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "https://s3.example.org/b", Err: err} }
	for _, c := range []struct {
		name   string
		err    error
		region string
		want   error
		says   string
	}{
		{"unknown access key", minio.ErrorResponse{Code: "InvalidAccessKeyId", StatusCode: 403}, "", ErrKeysRefused, "does not know the access key (from $K and $S)"},
		{"wrong secret", minio.ErrorResponse{Code: "SignatureDoesNotMatch", StatusCode: 403}, "", ErrKeysRefused, "secret key does not match"},
		{"expired token", minio.ErrorResponse{Code: "ExpiredToken", StatusCode: 400}, "", ErrKeysRefused, "session token"},
		{"denied", minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}, "", ErrAccessDenied, "(from $K and $S)"},
		{"denied in the right region", minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403, Region: "eu-west-1"}, "eu-west-1", ErrAccessDenied, ""},
		{"denied for the region", minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403, Region: "eu-west-1"}, "us-east-1", ErrWrongRegion, `the server wants "eu-west-1"`},
		{"AWS region in the body", minio.ErrorResponse{Code: "AuthorizationHeaderMalformed", StatusCode: 400, Region: "eu-central-1",
			Message: "The authorization header is malformed; the region 'us-east-1' is wrong; expecting 'eu-central-1'"}, "us-east-1", ErrWrongRegion, `the server wants "eu-central-1"`},
		{"AWS region in the message only", minio.ErrorResponse{Code: "AuthorizationHeaderMalformed", StatusCode: 400,
			Message: "The authorization header is malformed; the region 'us-east-1' is wrong; expecting 'ap-south-1'"}, "us-east-1", ErrWrongRegion, `the server wants "ap-south-1"`},
		{"minio invalid region", minio.ErrorResponse{Code: "InvalidRegion", StatusCode: 400, Message: "Region does not match, expecting region ‘us-west-2’."}, "us-east-1", ErrWrongRegion, `the server wants "us-west-2"`},
		{"region not said", minio.ErrorResponse{Code: "AuthorizationHeaderMalformed", StatusCode: 400}, "x", ErrWrongRegion, "the S3 region is wrong: "},
		{"clock", minio.ErrorResponse{Code: "RequestTimeTooSkewed", StatusCode: 403}, "", ErrClockSkew, "this machine's clock differs from the server's"},
		{"no bucket", minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}, "", ErrNoBucket, ""},
		{"wrapped", fmt.Errorf("creating: %w", minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}), "", ErrAccessDenied, "creating: "},
		{"HTTP to HTTPS", minio.ErrorResponse{Code: "400 Bad Request", StatusCode: 400, Message: "Client sent an HTTP request to an HTTPS server.\n"}, "", ErrNeedsTLS, ""},
		{"unknown authority", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), "", ErrUnknownAuthority, ""},
		{"other names", urlErr(&tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "s3.example.org"}}), "", ErrCertificate, ""},
		{"expired", urlErr(&tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Reason: x509.Expired}}), "", ErrCertificate, ""},
		{"plain HTTP answer", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), "", ErrNotTLS, ""},
		{"plain HTTP answer, as net/http says it", urlErr(errors.New("http: server gave HTTP response to HTTPS client")), "", ErrNotTLS, ""},
		{"refused", urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}), "", ErrUnreachable, "nothing listens there"},
		{"no such host", urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "s3.example.org", IsNotFound: true}}), "", ErrUnreachable, "no such host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.err, "$K and $S", c.region)
			if !errors.Is(got, c.want) {
				t.Fatalf("classify(%v) = %v, want %v", c.err, got, c.want)
			}
			if !errors.Is(got, c.err) && !errors.As(got, new(minio.ErrorResponse)) {
				t.Errorf("classify(%v) = %v, lost the original error", c.err, got)
			}
			if !strings.Contains(got.Error(), c.says) {
				t.Errorf("classify(%v) = %q, want it to say %q", c.err, got, c.says)
			}
		})
	}
	// Errors that show no misconfiguration pass unchanged.
	for _, err := range []error{
		minio.ErrorResponse{Code: "InternalError", StatusCode: 500},
		minio.ErrorResponse{Code: "SlowDown", StatusCode: 503},
		urlErr(errors.New("timeout")),
		fmt.Errorf("wrapped: %w", minio.ErrorResponse{Code: "NoSuchKey", StatusCode: 404}),
		fmt.Errorf("x: %w", minio.ErrorResponse{Code: "InvalidObjectState", StatusCode: 403}),
	} {
		if got := classify(err, "", ""); got != err {
			t.Errorf("classify(%v) = %v, want it unchanged", err, got)
		}
	}
}

func TestWantedRegion(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{minio.ErrorResponse{Region: "eu-west-3"}, "eu-west-3"},
		{fmt.Errorf("x: %w", minio.ErrorResponse{Message: "the region 'us-east-1' is wrong; expecting 'eu-north-1'"}), "eu-north-1"},
		{minio.ErrorResponse{Message: "Region does not match, expecting region ‘us-west-2’."}, "us-west-2"},
		{minio.ErrorResponse{Message: "the region is wrong"}, ""},
		{errors.New("expecting 'eu-north-1'"), ""},
		{&http.ProtocolError{}, ""},
	} {
		if got := WantedRegion(c.err); got != c.want {
			t.Errorf("WantedRegion(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
