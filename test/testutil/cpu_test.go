package testutil

import (
	"os"
	"testing"
	"time"
)

func TestCPUSeconds(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	before := CPUSeconds(os.Getpid())
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if CPUSeconds(os.Getpid()) >= before+0.05 {
			return
		}
	}
	t.Fatalf("5 s of spinning counted as less than 0.05 s of CPU (from %.2f s)", before)
}
