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
	cmd.Env = append(os.Environ(), "LOCKSTEP_S3_ACCESS_KEY=", "LOCKSTEP_S3_SECRET_KEY=")
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
