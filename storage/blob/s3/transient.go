package s3

import (
	"context"
	"errors"
	"net/http"

	"github.com/minio/minio-go/v7"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/netfail"
)

// transientCodes are the S3 error codes of failures that may pass.
var transientCodes = map[string]bool{
	"SlowDown":           true,
	"SlowDownRead":       true,
	"SlowDownWrite":      true,
	"RequestTimeout":     true,
	"InternalError":      true,
	"ServiceUnavailable": true,
	"Throttling":         true,
	"RequestThrottled":   true,
}

// Transient reports whether err, returned by a Store, is worth retrying,
// for a retry wrapper (storage/blob/retry): an S3 error answering 5xx or
// 429, or with a code asking to slow down or try again (SlowDown,
// RequestTimeout, InternalError, ServiceUnavailable ...), or a network
// failure (a timeout, a reset or refused connection, a connection closed
// mid-response). Everything else is permanent: access denied, a missing
// bucket, the blob errors (ErrNotExist, ErrExist, ErrInvalidKey,
// ErrSizeMismatch, ErrInvalidRange) and a context's error.
//
// The S3 error is found with errors.As, as the Store wraps it; for an
// unwrapped one that is what minio.ToErrorResponse does.
func Transient(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrNoBucket),
		errors.Is(err, blob.ErrNotExist), errors.Is(err, blob.ErrExist), errors.Is(err, blob.ErrInvalidKey),
		errors.Is(err, blob.ErrSizeMismatch), errors.Is(err, blob.ErrInvalidRange):
		return false
	}
	resp := minio.ToErrorResponse(err)
	if resp.Code == "" && resp.StatusCode == 0 {
		errors.As(err, &resp)
	}
	if resp.Code != "" || resp.StatusCode != 0 {
		switch resp.Code {
		case "AccessDenied", "NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch":
			return false
		}
		return transientCodes[resp.Code] || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
	}
	return netfail.Transient(err)
}
