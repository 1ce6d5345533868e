package crypt

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// vmaFlags returns the VmFlags of this process's mapping that holds addr.
func vmaFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return nil
}

// TestReadyForScrypt checks, in a process of its own as a recovery or a
// share has, that the allocation readyForScrypt's function makes is
// advised MADV_HUGEPAGE, and that the advice is taken back after. It is
// best effort by design: in a process where earlier allocations left a
// hole of about the size below, the allocation may land there instead.
func TestReadyForScrypt(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skip("transparent huge pages are off here")
	}
	if os.Getenv("LOCKSTEP_TEST_HUGE_SCRYPT") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReadyForScrypt$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "LOCKSTEP_TEST_HUGE_SCRYPT=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	UseHugePagesForScrypt()
	const size = 64 << 20
	var addr uintptr
	err = readyForScrypt(size, func() error {
		buf := make([]byte, size)
		// Its middle: its first bytes may come before the first whole
		// huge page of the range.
		addr = uintptr(unsafe.Pointer(&buf[size/2]))
		if f := vmaFlags(t, addr); !slices.Contains(f, "hg") {
			t.Errorf("the allocation's mapping has flags %v, want hg (MADV_HUGEPAGE)", f)
		}
		buf[size/2] = 1
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if f := vmaFlags(t, addr); !slices.Contains(f, "nh") || slices.Contains(f, "hg") {
		t.Errorf("afterwards the range has flags %v, want nh (MADV_NOHUGEPAGE)", f)
	}
}

func TestTHPOn(t *testing.T) {
	for mode, want := range map[string]bool{
		"always [madvise] never\n": true,
		"[always] madvise never\n": true,
		"always madvise [never]\n": false,
		"":                         false,
	} {
		if got := thpOn(mode); got != want {
			t.Errorf("thpOn(%q) = %v, want %v", mode, got, want)
		}
	}
}
