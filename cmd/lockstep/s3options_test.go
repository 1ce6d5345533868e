package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"lockstep/storage/blob/s3"
)

// TestS3Config: the flags become the store's Config; the storage class
// goes to chunk bodies and packs only, and archive classes are refused.
func TestS3Config(t *testing.T) {
	o := storeOptions{S3Endpoint: "s3.example.org", S3Bucket: "b", S3Addressing: "path", S3Region: "eu-west-3",
		S3CAFile: "/etc/ca.pem", S3CreateBucket: true, S3StorageClass: "STANDARD_IA", S3Profile: "backup"}
	cfg, err := s3Config(o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addressing != s3.AddressPath || cfg.Region != "eu-west-3" || cfg.CAFile != "/etc/ca.pem" || !cfg.CreateBucket || !cfg.UseTLS || cfg.AccessKey != "" {
		t.Errorf("Config = %+v", cfg)
	}
	var sources []string
	for _, k := range cfg.Keys {
		sources = append(sources, k.String())
	}
	if got := strings.Join(sources, "; "); !strings.HasPrefix(got, "$LOCKSTEP_S3_ACCESS_KEY and $LOCKSTEP_S3_SECRET_KEY; $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY; profile \"backup\" of ") {
		t.Errorf("key sources %q", got)
	}
	fk := strings.Repeat("ab", 8)
	for key, want := range map[string]string{
		"r/" + fk + "/c/" + strings.Repeat("01", 32): "STANDARD_IA",
		"r/" + fk + "/p/" + strings.Repeat("01", 16): "STANDARD_IA",
		"r/" + fk + "/log/0000000000000001":          "",
		"r/" + fk + "/envelope/0000000000000001":     "",
		"r/" + fk + "/meta.json":                     "",
	} {
		if got := cfg.StorageClassFor(key); got != want {
			t.Errorf("storage class of %s = %q, want %q", key, got, want)
		}
	}
	o.S3StorageClass = ""
	if cfg, _ := s3Config(o); cfg.StorageClassFor != nil {
		t.Error("a storage class function without --s3-storage-class")
	}
	for _, bad := range []storeOptions{
		{S3Addressing: "dns"},
		{S3Addressing: "auto", S3StorageClass: "GLACIER"},
		{S3Addressing: "auto", S3StorageClass: "DEEP_ARCHIVE"},
		{S3Addressing: "auto", S3StorageClass: "standard ia"},
	} {
		if _, err := s3Config(bad); err == nil {
			t.Errorf("s3Config(%+v) succeeded", bad)
		}
	}
}

// TestS3Hint: each misconfiguration s3.New reports is told the flag or
// setting that fixes it.
func TestS3Hint(t *testing.T) {
	region := minio.ErrorResponse{Code: "AuthorizationHeaderMalformed", Region: "eu-west-3"}
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", s3.ErrNoKeys), "$LOCKSTEP_S3_ACCESS_KEY"},
		{fmt.Errorf("x: %w", s3.ErrNoBucket), "--s3-create-bucket"},
		{fmt.Errorf("x: %w", s3.ErrKeysRefused), "keys"},
		{fmt.Errorf("x: %w", s3.ErrAccessDenied), "policy"},
		{fmt.Errorf("x: %w: %w", s3.ErrWrongRegion, region), "--s3-region=eu-west-3"},
		{fmt.Errorf("x: %w", s3.ErrWrongRegion), "--s3-region"},
		{fmt.Errorf("x: %w", s3.ErrClockSkew), "clock"},
		{fmt.Errorf("x: %w", s3.ErrUnknownAuthority), "--s3-ca-file"},
		{fmt.Errorf("x: %w", s3.ErrNotTLS), "add --s3-insecure"},
		{fmt.Errorf("x: %w", s3.ErrNeedsTLS), "drop --s3-insecure"},
		{fmt.Errorf("x: %w", s3.ErrUnreachable), "--s3-endpoint"},
		{errors.New("something else"), ""},
	} {
		got := s3Hint(c.err)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("s3Hint(%v) = %q, want it to say %q", c.err, got, c.want)
		}
	}
}
