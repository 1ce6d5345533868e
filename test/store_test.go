package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"lockstep/storage/blob/s3/s3test"
)

// TestServeWithS3Store: serve keeps its blobs in a real S3-compatible
// server when told to, and refuses to start with a clear error when the
// bucket or the keys are wrong.
func TestServeWithS3Store(t *testing.T) {
	cfg := s3test.Start(t)
	t.Setenv("LOCKSTEP_S3_ACCESS_KEY", cfg.AccessKey)
	t.Setenv("LOCKSTEP_S3_SECRET_KEY", cfg.SecretKey)
	n := startNode(t, "r", "--s3-endpoint", cfg.Endpoint, "--s3-bucket", cfg.Bucket, "--s3-prefix", "lockstep", "--s3-insecure")
	var st struct {
		Store string `json:"store"`
	}
	n.get("/rest/status", &st)
	if want := "s3:http://" + cfg.Endpoint + "/" + cfg.Bucket + "/lockstep"; st.Store != want {
		t.Fatalf("store %q, want %q", st.Store, want)
	}

	home := filepath.Join(t.TempDir(), "bad")
	r := run(t, home, "serve", "--listen", "tcp://127.0.0.1:0", "--gui", "127.0.0.1:0",
		"--s3-endpoint", cfg.Endpoint, "--s3-bucket", "no-such-bucket", "--s3-insecure")
	if r.code == 0 || !strings.Contains(r.stderr, "no-such-bucket") {
		t.Fatalf("serve with a missing bucket: exit %d, stderr %q", r.code, r.stderr)
	}
	assertOneLineError(t, r)

	cmd := exec.Command(binary, "--home", home, "serve", "--listen", "tcp://127.0.0.1:0", "--gui", "127.0.0.1:0",
		"--s3-endpoint", cfg.Endpoint, "--s3-bucket", cfg.Bucket, "--s3-insecure")
	// Nor from the AWS variables or credentials file of the machine the
	// test runs on.
	cmd.Env = append(os.Environ(), "LOCKSTEP_S3_ACCESS_KEY=", "LOCKSTEP_S3_SECRET_KEY=", "AWS_ACCESS_KEY_ID=", "AWS_ACCESS_KEY=",
		"AWS_SECRET_ACCESS_KEY=", "AWS_SECRET_KEY=", "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "no-credentials"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "LOCKSTEP_S3_ACCESS_KEY") {
		t.Fatalf("serve without keys: %v %q", err, out)
	}
}

func TestServeLocalStoreDefault(t *testing.T) {
	n := startNode(t, "l")
	var st struct {
		Store string `json:"store"`
	}
	n.get("/rest/status", &st)
	if st.Store != "local:"+filepath.Join(n.home, "blobs") {
		t.Fatalf("store %q", st.Store)
	}
}

// TestServeS3Options: serve reaches an HTTPS server with a private
// authority through --s3-ca-file, creates its bucket with
// --s3-create-bucket, and takes its keys from the AWS variables or the
// AWS credentials file; each misconfiguration stops it with one line that
// names the flag that fixes it.
func TestServeS3Options(t *testing.T) {
	srv := s3test.NewServerWith(t, s3test.Options{TLS: true})
	cfg := srv.Config()
	for _, k := range []string{"LOCKSTEP_S3_ACCESS_KEY", "LOCKSTEP_S3_SECRET_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	credFile := filepath.Join(t.TempDir(), "credentials")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", credFile)
	s3Args := func(bucket string, extra ...string) []string {
		return append([]string{"--s3-endpoint", cfg.Endpoint, "--s3-bucket", bucket}, extra...)
	}
	fails := func(name string, args []string, says ...string) {
		t.Helper()
		r := run(t, filepath.Join(t.TempDir(), "bad"), append([]string{"serve", "--listen", "tcp://127.0.0.1:0", "--gui", "127.0.0.1:0", "--no-local-discovery"}, args...)...)
		if r.code == 0 {
			t.Fatalf("serve with %s started", name)
		}
		for _, s := range says {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("serve with %s: stderr %q does not say %q", name, r.stderr, s)
			}
		}
		if strings.Contains(r.stderr, cfg.SecretKey) {
			t.Errorf("serve with %s shows the secret key: %q", name, r.stderr)
		}
		assertOneLineError(t, r)
	}

	fails("no keys", s3Args("made", "--s3-ca-file", cfg.CAFile),
		"no S3 keys found", "$LOCKSTEP_S3_ACCESS_KEY and $LOCKSTEP_S3_SECRET_KEY (not set)", credFile+" (no such file)")
	t.Setenv("AWS_ACCESS_KEY_ID", cfg.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", cfg.SecretKey)
	fails("no CA file", s3Args("made"), "unknown authority", "--s3-ca-file")
	fails("plain HTTP", s3Args("made", "--s3-insecure"), "only HTTPS", "drop --s3-insecure")
	fails("a missing bucket", s3Args("made", "--s3-ca-file", cfg.CAFile), `"made"`, "--s3-create-bucket")
	fails("the wrong region", s3Args("made", "--s3-ca-file", cfg.CAFile, "--s3-region", "eu-west-3"), "--s3-region=us-east-1")
	fails("an archive storage class", s3Args("made", "--s3-storage-class", "GLACIER"), "GLACIER")
	fails("an unknown addressing", s3Args("made", "--s3-addressing", "dns"), "auto, path or virtual")
	fails("S3 flags without an endpoint", []string{"--s3-create-bucket"}, "need --s3-endpoint")

	// The keys from the AWS variables; the bucket made at the first start.
	n := startNode(t, "r", s3Args("made", "--s3-ca-file", cfg.CAFile, "--s3-create-bucket", "--s3-region", "us-east-1",
		"--s3-addressing", "path", "--s3-storage-class", "STANDARD_IA")...)
	var st struct {
		Store string `json:"store"`
	}
	n.get("/rest/status", &st)
	if want := "s3:https://" + cfg.Endpoint + "/made"; st.Store != want {
		t.Fatalf("store %q, want %q", st.Store, want)
	}
	n.stop()

	// The keys from a profile of the credentials file.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if err := os.WriteFile(credFile, []byte("[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing-at-all\n\n[lockstep]\naws_access_key_id = "+cfg.AccessKey+"\naws_secret_access_key = "+cfg.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fails("refused keys", s3Args("made", "--s3-ca-file", cfg.CAFile), "the S3 keys were refused", `profile "default" of `+credFile)
	startNode(t, "r2", s3Args("made", "--s3-ca-file", cfg.CAFile, "--s3-profile", "lockstep")...)
}
