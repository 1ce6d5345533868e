package test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"lockstep/web"
)

// A node's status carries its memory, and the peak outside scrypt leaves
// out the 256 MiB a share's envelope takes while keeping what came
// before and after; any command writes its own memory at exit with
// LOCKSTEP_MEMSTATS (docs/contract.md).
func TestMemoryStatus(t *testing.T) {
	a, r := startNode(t, "a"), startNode(t, "r")
	src := filepath.Join(t.TempDir(), "src")
	writeFile(t, filepath.Join(src, "x.txt"), []byte("memory"), 0o644)
	a.cli("folder", "add", "f", src)
	memoryOf := func(n *node) web.MemoryStatus {
		t.Helper()
		var st struct {
			Memory *web.MemoryStatus `json:"memory"`
		}
		n.get("/rest/status", &st)
		if st.Memory == nil || st.Memory.RSS <= 0 || st.Memory.Peak < st.Memory.RSS || st.Memory.PeakOutsideKDF <= 0 {
			t.Fatalf("%s's status memory: %+v", n.name, st.Memory)
		}
		return *st.Memory
	}
	before := memoryOf(a)

	backUp(t, a, r, "f", passwordFile(t, "memory password"))
	after := memoryOf(a)
	if after.Peak < 256<<20 {
		t.Errorf("a's peak %d MiB after sealing an envelope, want scrypt's 256 MiB in it", after.Peak>>20)
	}
	if after.PeakOutsideKDF < before.PeakOutsideKDF || after.PeakOutsideKDF > after.Peak-(128<<20) {
		t.Errorf("a's peak outside scrypt %d MiB (before the share %d MiB, overall %d MiB), want scrypt's work area left out",
			after.PeakOutsideKDF>>20, before.PeakOutsideKDF>>20, after.Peak>>20)
	}
	if after.RSS > after.Peak-(128<<20) {
		t.Errorf("a holds %d MiB after the share (peak %d MiB), want scrypt's work area returned", after.RSS>>20, after.Peak>>20)
	}

	path := filepath.Join(t.TempDir(), "memstats.json")
	cmd := command(context.Background(), "", "--home", a.home, "status", "--json")
	cmd.Env = append(os.Environ(), "LOCKSTEP_MEMSTATS="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m web.MemoryStatus
	if err := json.Unmarshal(raw, &m); err != nil || m.RSS <= 0 || m.Peak < m.RSS {
		t.Fatalf("LOCKSTEP_MEMSTATS wrote %s (%v)", raw, err)
	}
}
