package s3

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// A KeySource is one place New looks for the S3 keys (see Config.Keys).
// Its String names it for messages, never showing a key.
type KeySource struct {
	name     string
	provider credentials.Provider
}

func (k KeySource) String() string { return k.name }

// EnvKeys reads the access and secret keys from two environment
// variables, when New runs.
func EnvKeys(accessVar, secretVar string) KeySource {
	return KeySource{
		name:     fmt.Sprintf("$%s and $%s", accessVar, secretVar),
		provider: &envProvider{access: accessVar, secret: secretVar},
	}
}

// AWSEnvKeys reads the keys the AWS tools read from the environment:
// $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN.
func AWSEnvKeys() KeySource {
	return KeySource{name: "$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY", provider: &credentials.EnvAWS{}}
}

// AWSFileKeys reads a profile of the AWS shared credentials file:
// $AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials. An empty profile
// means $AWS_PROFILE, else "default".
func AWSFileKeys(profile string) KeySource {
	if profile == "" {
		profile = os.Getenv("AWS_PROFILE")
	}
	if profile == "" {
		profile = "default"
	}
	file := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return KeySource{name: "~/.aws/credentials (no home directory)", provider: failing{err}}
		}
		file = filepath.Join(home, ".aws", "credentials")
	}
	return KeySource{
		name:     fmt.Sprintf("profile %q of %s", profile, file),
		provider: &credentials.FileAWSCredentials{Filename: file, Profile: profile},
	}
}

// keys returns the credentials New signs with and where they come from:
// Config's own keys if set, else the first source of Config.Keys that
// gives both keys. A source that gives only one of them is an error, not
// skipped.
func keys(cfg Config) (*credentials.Credentials, string, error) {
	if cfg.AccessKey != "" || cfg.SecretKey != "" {
		if cfg.AccessKey == "" || cfg.SecretKey == "" {
			return nil, "", fmt.Errorf("%w: the configuration has only one of the access and secret keys", ErrNoKeys)
		}
		return credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""), "", nil
	}
	var tried []string
	providers := make([]credentials.Provider, len(cfg.Keys))
	for i, src := range cfg.Keys {
		providers[i] = src.provider
		v, err := src.provider.Retrieve()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			tried = append(tried, src.name+" (no such file)")
		case err != nil:
			return nil, "", fmt.Errorf("%w: reading %s: %w", ErrNoKeys, src.name, err)
		case v.AccessKeyID == "" && v.SecretAccessKey == "":
			tried = append(tried, src.name+" (not set)")
		case v.AccessKeyID == "" || v.SecretAccessKey == "":
			return nil, "", fmt.Errorf("%w: %s gives only one of the access and secret keys", ErrNoKeys, src.name)
		default:
			// The chain asks the same sources again whenever the keys
			// expire (session tokens, SSO), and picks the same one while
			// the earlier ones stay empty.
			return credentials.NewChainCredentials(providers[i:]), src.name, nil
		}
	}
	if len(tried) == 0 {
		return nil, "", fmt.Errorf("%w: no key source is configured", ErrNoKeys)
	}
	return nil, "", fmt.Errorf("%w: tried %s", ErrNoKeys, strings.Join(tried, ", "))
}

// envProvider reads keys from two environment variables.
type envProvider struct {
	access, secret string
}

func (e *envProvider) Retrieve() (credentials.Value, error) {
	v := credentials.Value{
		AccessKeyID:     os.Getenv(e.access),
		SecretAccessKey: os.Getenv(e.secret),
		SignerType:      credentials.SignatureV4,
	}
	if v.AccessKeyID == "" || v.SecretAccessKey == "" {
		v.SignerType = credentials.SignatureAnonymous
	}
	return v, nil
}

func (e *envProvider) RetrieveWithCredContext(*credentials.CredContext) (credentials.Value, error) {
	return e.Retrieve()
}

func (e *envProvider) IsExpired() bool { return false }

// failing is a provider that cannot give keys.
type failing struct{ err error }

func (f failing) Retrieve() (credentials.Value, error) { return credentials.Value{}, f.err }
func (f failing) RetrieveWithCredContext(*credentials.CredContext) (credentials.Value, error) {
	return f.Retrieve()
}
func (f failing) IsExpired() bool { return true }
