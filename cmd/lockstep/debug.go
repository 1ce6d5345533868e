package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startDebug starts the debugging aids the environment asks for, for
// measuring whole-process runs of any command: LOCKSTEP_CPUPROFILE=FILE
// writes a CPU profile and, to FILE.heap at exit, every allocation since
// start; LOCKSTEP_TRACE=FILE an execution trace. The returned function
// stops them.
func startDebug() (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if path := os.Getenv("LOCKSTEP_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return stop, fmt.Errorf("LOCKSTEP_CPUPROFILE: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, fmt.Errorf("LOCKSTEP_CPUPROFILE: %w", err)
		}
		runtime.MemProfileRate = 512 << 10
		stops = append(stops, func() {
			pprof.StopCPUProfile()
			f.Close()
			if mf, err := os.Create(path + ".heap"); err == nil {
				pprof.Lookup("allocs").WriteTo(mf, 0)
				mf.Close()
			}
		})
	}
	if path := os.Getenv("LOCKSTEP_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return stop, fmt.Errorf("LOCKSTEP_TRACE: %w", err)
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return stop, fmt.Errorf("LOCKSTEP_TRACE: %w", err)
		}
		stops = append(stops, func() {
			trace.Stop()
			f.Close()
		})
	}
	return stop, nil
}
