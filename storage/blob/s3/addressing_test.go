package s3

import (
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestAddressing(t *testing.T) {
	for s, want := range map[string]minio.BucketLookupType{"auto": minio.BucketLookupAuto, "path": minio.BucketLookupPath, "virtual": minio.BucketLookupDNS} {
		a, err := ParseAddressing(s)
		if err != nil || a.String() != s || a.lookup() != want {
			t.Errorf("ParseAddressing(%q) = %v (lookup %v), %v", s, a, a.lookup(), err)
		}
	}
	for _, s := range []string{"", "Path", "dns", "virtual-hosted"} {
		if _, err := ParseAddressing(s); err == nil {
			t.Errorf("ParseAddressing(%q) succeeded", s)
		}
	}
	if got := Addressing(7).String(); got != "Addressing(7)" {
		t.Errorf("Addressing(7).String() = %q", got)
	}
}

// TestTakesChecksums: every server gets a PUT's checksum header but
// Google's, for which minio-go refuses every such PUT.
func TestTakesChecksums(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"127.0.0.1:9000":                true,
		"s3.amazonaws.com":              true,
		"minio.example:443":             true,
		"storage.googleapis.com":        false,
		"storage.googleapis.com:443":    false,
		"bucket.storage.googleapis.com": true, // not the S3 interface's host
	} {
		if got := takesChecksums(endpoint); got != want {
			t.Errorf("takesChecksums(%q) = %v, want %v", endpoint, got, want)
		}
	}
}
