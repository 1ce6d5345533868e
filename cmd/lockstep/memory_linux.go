package main

import (
	"bytes"
	"os"
	"strconv"
)

// readMemory returns the process's resident set size and its peak since
// start or the last resetPeak, in bytes (0 where unknown).
func readMemory() (rss, hwm int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for line := range bytes.Lines(b) {
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &rss
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &hwm
		default:
			continue
		}
		f := bytes.Fields(line)
		if len(f) >= 2 {
			kb, _ := strconv.ParseInt(string(f[1]), 10, 64)
			*dst = kb << 10
		}
	}
	return rss, hwm
}

// resetPeak makes the peak the resident set size now.
func resetPeak() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
