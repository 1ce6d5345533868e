package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"lockstep/storage/blob"
	"lockstep/storage/blob/local"
	"lockstep/storage/blob/s3"
)

// storeOptions say where the node keeps blobs (the sealed chunks and logs
// an untrusted receiver holds): a directory in the home by default, or an
// S3 bucket. Keys come from the environment or the AWS credentials file,
// never from flags, so they do not show in process listings.
type storeOptions struct {
	S3Endpoint     string // host:port; empty for the local directory
	S3Bucket       string
	S3Prefix       string
	S3Insecure     bool   // plain HTTP, for a server on the same host or network
	S3Region       string // empty: ask the server
	S3Addressing   string // auto, path or virtual
	S3CAFile       string // PEM certificates trusted besides the system's
	S3Profile      string // of the AWS credentials file
	S3StorageClass string // of chunk bodies and packs
	S3CreateBucket bool
	Layers         storeLayerOptions
}

// Environment variables holding the S3 keys.
const (
	envS3AccessKey = "LOCKSTEP_S3_ACCESS_KEY"
	envS3SecretKey = "LOCKSTEP_S3_SECRET_KEY"
)

// openStore opens the node's blob store and says what it is.
func openStore(ctx context.Context, homeDir string, o storeOptions) (blob.Store, string, func() error, error) {
	if o.S3Endpoint == "" {
		if o != (storeOptions{S3Addressing: o.S3Addressing, Layers: o.Layers}) || o.S3Addressing != "" && o.S3Addressing != "auto" {
			return nil, "", nil, errors.New("the --s3-* flags need --s3-endpoint")
		}
		dir := filepath.Join(homeDir, "blobs")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", nil, err
		}
		st, err := local.Open(dir)
		if err != nil {
			return nil, "", nil, fmt.Errorf("opening blob store: %w", err)
		}
		return layerStore(st, o.Layers, nil), "local:" + dir, st.Close, nil
	}
	if o.S3Bucket == "" {
		return nil, "", nil, errors.New("--s3-endpoint needs --s3-bucket")
	}
	cfg, err := s3Config(o)
	if err != nil {
		return nil, "", nil, err
	}
	st, err := s3.New(ctx, cfg)
	if err != nil {
		return nil, "", nil, fmt.Errorf("opening S3 store at %s: %w%s", o.S3Endpoint, err, s3Hint(err))
	}
	// s3.New listed at most one object: a wrong bucket or refused keys
	// failed there, at start, not at the first upload.
	scheme := "https"
	if o.S3Insecure {
		scheme = "http"
	}
	desc := fmt.Sprintf("s3:%s://%s/%s", scheme, o.S3Endpoint, o.S3Bucket)
	if o.S3Prefix != "" {
		desc += "/" + o.S3Prefix
	}
	return layerStore(st, o.Layers, s3.Transient), desc, st.Close, nil
}
