package s3_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"

	"lockstep/storage/blob"
	"lockstep/storage/blob/s3"
)

func TestTransient(t *testing.T) {
	resp := func(code string, status int) error { return minio.ErrorResponse{Code: code, StatusCode: status} }
	urlErr := func(err error) error { return &url.Error{Op: "Put", URL: "http://127.0.0.1:1/b/k", Err: err} }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{resp("SlowDown", 503), true},
		{fmt.Errorf("putting blob %q: %w", "k", resp("SlowDown", 503)), true},
		{resp("RequestTimeout", 400), true},
		{resp("InternalError", 500), true},
		{resp("ServiceUnavailable", 503), true},
		{resp("", 502), true},
		{resp("", 429), true},
		{urlErr(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), true},
		{urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{urlErr(io.EOF), true},
		{urlErr(io.ErrUnexpectedEOF), true},
		{fmt.Errorf("getting blob: %w", io.ErrUnexpectedEOF), true},
		{urlErr(&net.DNSError{Err: "timeout", IsTimeout: true}), true},

		{nil, false},
		{resp("AccessDenied", 403), false},
		{resp("InvalidAccessKeyId", 403), false},
		{resp("SignatureDoesNotMatch", 403), false},
		{resp("NoSuchBucket", 404), false},
		{resp("NoSuchKey", 404), false},
		{fmt.Errorf("%w: b", s3.ErrNoBucket), false},
		{blob.ErrNotExist, false},
		{blob.ErrExist, false},
		{fmt.Errorf("k: %w", blob.ErrInvalidKey), false},
		{blob.ErrSizeMismatch, false},
		{blob.ErrInvalidRange, false},
		{context.Canceled, false},
		{urlErr(context.DeadlineExceeded), false},
		{urlErr(&net.DNSError{Err: "no such host", IsNotFound: true}), false},
		{io.EOF, false}, // not from a transport
		{errors.New("reader broke"), false},
	} {
		if got := s3.Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
