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
