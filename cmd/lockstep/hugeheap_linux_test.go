package main

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

// mapping returns the VmFlags and AnonHugePages (in kB) of this process's
// mapping that holds addr.
func mapping(t *testing.T, addr uintptr) (flags []string, hugeKB int) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in, found := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			found = found || in
			continue
		}
		if !in {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &hugeKB)
		}
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			flags = strings.Fields(rest)
		}
	}
	if !found {
		t.Fatalf("no mapping holds %#x", addr)
	}
	return flags, hugeKB
}

// TestAdvise checks, in a process of its own as a node or a recovery has,
// that what the heap allocates after adviseHugeHeap lies in a mapping hugeHeapOn
// MADV_HUGEPAGE, and gets huge pages where the kernel has free ones.
func TestAdvise(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !thpOn(string(mode)) {
		t.Skip("transparent huge pages are off here")
	}
	if os.Getenv("LOCKSTEP_TEST_HUGEHEAP") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAdvise$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "LOCKSTEP_TEST_HUGEHEAP=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Logf("%s", out)
		return
	}
	if hugeHeapAdvised() {
		t.Fatal("hugeHeapAdvised before adviseHugeHeap")
	}
	if !adviseHugeHeap() {
		t.Fatal("adviseHugeHeap refused where huge pages are on")
	}
	if !hugeHeapAdvised() {
		t.Fatal("not hugeHeapAdvised after adviseHugeHeap")
	}
	const size = 64 << 20
	buf := make([]byte, size)
	for i := 0; i < size; i += 4096 {
		buf[i] = 1
	}
	addr := uintptr(unsafe.Pointer(&buf[size/2]))
	flags, hugeKB := mapping(t, addr)
	if !slices.Contains(flags, "hg") {
		t.Errorf("the allocation's mapping has flags %v, want hg (MADV_HUGEPAGE)", flags)
	}
	// Huge pages depend on the kernel finding free 2 MiB ranges: logged,
	// not required.
	t.Logf("mapping of the allocation: %d kB in huge pages", hugeKB)
}

// Go's own switch for huge pages turns adviseHugeHeap off.
func TestAdviseHonoursDisableTHP(t *testing.T) {
	if os.Getenv("LOCKSTEP_TEST_HUGEHEAP") != "" {
		t.Skip("runs in the parent only")
	}
	t.Setenv("GODEBUG", "disablethp=1")
	if adviseHugeHeap() {
		t.Fatal("adviseHugeHeap with GODEBUG=disablethp=1")
	}
}

func TestRangeSize(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		intSize    int
		overcommit string
		ram        uint64
		want       int
	}{
		{64, "0", 24 * gib, hugeHeapMax},
		{64, "1", 4 * gib, hugeHeapMax},
		{64, "0", 4*gib - 1, gib - hugePage}, // a quarter, in whole huge pages
		{64, "0", 2 * gib, gib / 2},
		{64, "0", 4 * hugeHeapMin, hugeHeapMin},
		{64, "0", 4*hugeHeapMin - 4, 0},
		{64, "2", 24 * gib, 0},
		{32, "0", 24 * gib, 0},
	} {
		if got := hugeHeapRange(c.intSize, c.overcommit, c.ram); got != c.want {
			t.Errorf("hugeHeapRange(%d, %q, %d) = %d, want %d", c.intSize, c.overcommit, c.ram, got, c.want)
		}
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
