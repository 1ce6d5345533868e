package testutil

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUSeconds is the CPU time (user and system) process pid has used so
// far, from /proc; 0 where there is none to read.
func CPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: utime and stime are the 12th and 13th, in ticks of 1/100 s
	// (Linux's fixed USER_HZ).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return float64(ut+st) / 100
}
