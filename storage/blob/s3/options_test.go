package s3_test

import (
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"lockstep/storage/blob/s3"
	"lockstep/storage/blob/s3/s3test"
)

// roundTrip puts a blob and reads it back.
func roundTrip(t *testing.T, s *s3.Store) {
	t.Helper()
	if err := s.Put(t.Context(), "k", strings.NewReader("value"), 5); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := s.Get(t.Context(), "k", func(r io.Reader) (err error) { got, err = io.ReadAll(r); return err }); err != nil {
		t.Fatal(err)
	}
	if string(got) != "value" {
		t.Fatalf("Get = %q", got)
	}
}

// mustFail opens cfg and wants an error matching want that says says.
func mustFail(t *testing.T, cfg s3.Config, want error, says string) {
	t.Helper()
	s, err := s3.New(t.Context(), cfg)
	if err == nil {
		s.Close()
		t.Fatalf("New succeeded, want %v", want)
	}
	t.Log(err)
	if !errors.Is(err, want) || !strings.Contains(err.Error(), says) {
		t.Fatalf("New = %v, want %v saying %q", err, want, says)
	}
	if cfg.SecretKey != "" && strings.Contains(err.Error(), cfg.SecretKey) {
		t.Fatalf("the error shows the secret key: %v", err)
	}
}

// TestRefusedKeys: a real server's refusal of an unknown access key or a
// wrong secret is ErrKeysRefused, and the secret is not in the message.
func TestRefusedKeys(t *testing.T) {
	srv := s3test.NewServer(t)
	cfg := srv.Bucket(t)
	wrongSecret := cfg
	wrongSecret.SecretKey = "not-the-secret-key-at-all"
	mustFail(t, wrongSecret, s3.ErrKeysRefused, "the S3 keys were refused")
	wrongAccess := cfg
	wrongAccess.AccessKey = "nobody"
	mustFail(t, wrongAccess, s3.ErrKeysRefused, "the S3 keys were refused")
}

// TestCreateBucket: a missing bucket is ErrNoBucket, unless CreateBucket
// is set; then New creates it, and opens it again afterwards.
func TestCreateBucket(t *testing.T) {
	srv := s3test.NewServer(t)
	cfg := srv.Config()
	cfg.Bucket = "made-by-new"
	mustFail(t, cfg, s3.ErrNoBucket, `"made-by-new"`)
	cfg.CreateBucket = true
	roundTrip(t, open(t, cfg))
	s := open(t, cfg) // it exists now
	if _, err := s.Stat(t.Context(), "k"); err != nil {
		t.Fatalf("the blob in the created bucket: %v", err)
	}
	cfg.CreateBucket = false
	open(t, cfg)
}

// TestTLS: a server with a certificate of a private authority is reached
// with CAFile, and refused without it; a bad CA file, plain HTTP to it and
// TLS to a plain server are each their own error.
func TestTLS(t *testing.T) {
	srv := s3test.NewServerWith(t, s3test.Options{TLS: true})
	cfg := srv.Bucket(t)
	roundTrip(t, open(t, cfg))

	noCA := cfg
	noCA.CAFile = ""
	mustFail(t, noCA, s3.ErrUnknownAuthority, "unknown authority")

	plain := cfg
	plain.CAFile, plain.UseTLS = "", false
	mustFail(t, plain, s3.ErrNeedsTLS, "")

	bad := cfg
	bad.CAFile = filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(bad.CAFile, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustFail(t, bad, s3.ErrBadCAFile, "holds no PEM certificate")
	bad.CAFile += ".missing"
	mustFail(t, bad, s3.ErrBadCAFile, "no such file")
	mustFail(t, s3.Config{Endpoint: cfg.Endpoint, Bucket: cfg.Bucket, AccessKey: "access", SecretKey: "secret-key", CAFile: cfg.CAFile}, s3.ErrBadCAFile, "plain HTTP")

	tlsToPlain := s3test.Start(t)
	tlsToPlain.UseTLS = true
	mustFail(t, tlsToPlain, s3.ErrNotTLS, "")
}

// TestWrongRegion: requests signed for another region than the server's
// are ErrWrongRegion; with no region the client asks the server.
func TestWrongRegion(t *testing.T) {
	srv := s3test.NewServerWith(t, s3test.Options{Region: "eu-west-3"})
	cfg := srv.Bucket(t)
	roundTrip(t, open(t, cfg))
	asked := cfg
	asked.Region = ""
	open(t, asked)
	wrong := cfg
	wrong.Region = "us-east-1"
	mustFail(t, wrong, s3.ErrWrongRegion, "region")
}

// TestUnreachable: nothing listening at the endpoint is ErrUnreachable.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	mustFail(t, s3.Config{Endpoint: addr, Bucket: "bucket", AccessKey: "access", SecretKey: "secret-key"}, s3.ErrUnreachable, "connection refused")
}

// TestKeySources: keys come from the first source that has both; a source
// with one key is an error, and with none the error lists what was tried.
func TestKeySources(t *testing.T) {
	srv := s3test.NewServer(t)
	cfg := srv.Bucket(t)
	access, secret := cfg.AccessKey, cfg.SecretKey
	cfg.AccessKey, cfg.SecretKey = "", ""
	dir := t.TempDir()
	credFile := filepath.Join(dir, "credentials")
	for _, k := range []string{"LS_ACCESS", "LS_SECRET", "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", credFile)
	sources := func(profile string) []s3.KeySource {
		return []s3.KeySource{s3.EnvKeys("LS_ACCESS", "LS_SECRET"), s3.AWSEnvKeys(), s3.AWSFileKeys(profile)}
	}
	cfg.Keys = sources("")
	mustFail(t, cfg, s3.ErrNoKeys, "tried $LS_ACCESS and $LS_SECRET (not set), $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (not set), profile \"default\" of "+credFile+" (no such file)")

	// The shared file, with the profile of the argument, else $AWS_PROFILE.
	if err := os.WriteFile(credFile, []byte("[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[lockstep]\naws_access_key_id = "+access+"\naws_secret_access_key = "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustFail(t, cfg, s3.ErrKeysRefused, `(from profile "default" of `+credFile+`)`)
	cfg.Keys = sources("lockstep")
	roundTrip(t, open(t, cfg))
	t.Setenv("AWS_PROFILE", "lockstep")
	cfg.Keys = sources("")
	open(t, cfg)
	cfg.Keys = sources("missing")
	mustFail(t, cfg, s3.ErrNoKeys, `reading profile "missing"`)

	// The AWS variables come before the file.
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	mustFail(t, cfg, s3.ErrNoKeys, "$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY gives only one of")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	mustFail(t, cfg, s3.ErrKeysRefused, "(from $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY)")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	open(t, cfg)

	// Lockstep's own variables come first.
	t.Setenv("LS_ACCESS", access)
	t.Setenv("LS_SECRET", "wrong")
	mustFail(t, cfg, s3.ErrKeysRefused, "(from $LS_ACCESS and $LS_SECRET)")
	t.Setenv("LS_SECRET", secret)
	open(t, cfg)

	// Keys in the Config itself come before every source.
	cfg.AccessKey, cfg.SecretKey = access, "wrong"
	mustFail(t, cfg, s3.ErrKeysRefused, "the secret key does not match")
}

// TestStorageClass: PUTs carry the class StorageClassFor gives their key,
// in one PUT and in a multipart upload. versitygw keeps every object as
// STANDARD, so a proxy in front of it records what the client asks for.
func TestStorageClass(t *testing.T) {
	cfg := s3test.Start(t)
	var mu sync.Mutex
	classes := map[string]string{} // object name: class of its first PUT or POST ?uploads
	target := &url.URL{Scheme: "http", Host: cfg.Endpoint}
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // signed
			if r.In.Method == http.MethodPut && r.In.URL.Query().Get("partNumber") == "" || r.In.Method == http.MethodPost && r.In.URL.Query().Has("uploads") {
				mu.Lock()
				classes[strings.TrimPrefix(r.In.URL.Path, "/"+cfg.Bucket+"/")] = r.In.Header.Get("X-Amz-Storage-Class")
				mu.Unlock()
			}
		},
	})
	t.Cleanup(proxy.Close)
	cfg.Endpoint = strings.TrimPrefix(proxy.URL, "http://")
	cfg.StorageClassFor = func(key string) string {
		if strings.HasPrefix(key, "cold/") {
			return "STANDARD_IA"
		}
		return ""
	}
	s := open(t, cfg)
	for _, key := range []string{"cold/a", "hot/a"} {
		if err := s.Put(t.Context(), key, strings.NewReader("v"), 1); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("x", s3.PartSize+1)
	if err := s.Put(t.Context(), "cold/big", strings.NewReader(big), int64(len(big))); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), "cold/created", strings.NewReader("v"), 1); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cold/a": "STANDARD_IA", "cold/big": "STANDARD_IA", "cold/created": "STANDARD_IA", "hot/a": ""}
	mu.Lock()
	defer mu.Unlock()
	if !maps.Equal(classes, want) {
		t.Errorf("storage classes asked for = %q, want %q", classes, want)
	}
}
