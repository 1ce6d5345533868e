package main

import (
	"errors"
	"fmt"
	"regexp"

	"lockstep/storage/blob/s3"
	"lockstep/sync/receiver"
)

// s3Config turns the S3 flags into the store's Config. Keys come from
// $LOCKSTEP_S3_ACCESS_KEY and $LOCKSTEP_S3_SECRET_KEY, else the AWS
// variables, else the AWS shared credentials file.
func s3Config(o storeOptions) (s3.Config, error) {
	addressing, err := s3.ParseAddressing(o.S3Addressing)
	if err != nil {
		return s3.Config{}, fmt.Errorf("--s3-addressing: %w", err)
	}
	cfg := s3.Config{
		Endpoint:     o.S3Endpoint,
		Bucket:       o.S3Bucket,
		Prefix:       o.S3Prefix,
		Keys:         []s3.KeySource{s3.EnvKeys(envS3AccessKey, envS3SecretKey), s3.AWSEnvKeys(), s3.AWSFileKeys(o.S3Profile)},
		UseTLS:       !o.S3Insecure,
		CAFile:       o.S3CAFile,
		Region:       o.S3Region,
		Addressing:   addressing,
		CreateBucket: o.S3CreateBucket,
	}
	if class := o.S3StorageClass; class != "" {
		if err := checkStorageClass(class); err != nil {
			return s3.Config{}, err
		}
		// Only the bulk: logs, envelopes and meta objects are small,
		// rewritten or read at every start, where an infrequent-access
		// class costs more than it saves.
		cfg.StorageClassFor = func(key string) string {
			if receiver.IsDataKey(key) {
				return class
			}
			return ""
		}
	}
	return cfg, nil
}

var storageClassName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// checkStorageClass refuses a malformed class, and the archive classes
// whose objects cannot be read without a restore first.
func checkStorageClass(class string) error {
	switch {
	case !storageClassName.MatchString(class):
		return fmt.Errorf("--s3-storage-class %q: want a class name such as STANDARD_IA", class)
	case class == "GLACIER" || class == "DEEP_ARCHIVE":
		return fmt.Errorf("--s3-storage-class %s: its objects cannot be read without restoring them first, and devices read chunks back; use STANDARD_IA, ONEZONE_IA or GLACIER_IR", class)
	}
	return nil
}

// s3Hint says which flag or setting fixes a misconfiguration s3.New found,
// as " (...)", or "".
func s3Hint(err error) string {
	hint := ""
	switch {
	case errors.Is(err, s3.ErrNoKeys):
		hint = fmt.Sprintf("set $%s and $%s, or the AWS variables, or a profile of the AWS credentials file (--s3-profile)", envS3AccessKey, envS3SecretKey)
	case errors.Is(err, s3.ErrNoBucket):
		hint = "create the bucket, or start with --s3-create-bucket"
	case errors.Is(err, s3.ErrKeysRefused):
		hint = "check the access and secret keys"
	case errors.Is(err, s3.ErrAccessDenied):
		hint = "the keys' policy must let them list, read, write and delete objects in the bucket"
	case errors.Is(err, s3.ErrWrongRegion):
		if r := s3.WantedRegion(err); r != "" {
			hint = "start with --s3-region=" + r
		} else {
			hint = "set --s3-region to the bucket's region, or leave it empty to ask the server"
		}
	case errors.Is(err, s3.ErrClockSkew):
		hint = "set this machine's clock right, for instance with NTP"
	case errors.Is(err, s3.ErrUnknownAuthority):
		hint = "give the certificate of the authority that signed the server's with --s3-ca-file"
	case errors.Is(err, s3.ErrNotTLS):
		hint = "for a server that speaks plain HTTP, add --s3-insecure"
	case errors.Is(err, s3.ErrNeedsTLS):
		hint = "drop --s3-insecure"
	case errors.Is(err, s3.ErrUnreachable):
		hint = "check --s3-endpoint and that the server runs"
	}
	if hint == "" {
		return ""
	}
	return " (" + hint + ")"
}
