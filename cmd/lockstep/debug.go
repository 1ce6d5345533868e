package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sync/atomic"
	"time"
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
	if dir := os.Getenv("LOCKSTEP_HEAPDUMP"); dir != "" {
		stops = append(stops, heapDumps(dir))
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

// heapDumps writes the heap in use to DIR/heap-PID-N-SIZE.pprof whenever
// the process's peak resident memory outside scrypt rises (looked at
// every 100 ms), and the Go runtime's figures to DIR/heap-PID.txt,
// and the kernel's map of the process to DIR/heap-PID-N.smaps, for
// finding what a peak is made of. It returns a function that stops.
func heapDumps(dir string) func() {
	runtime.MemProfileRate = 64 << 10
	done := make(chan struct{})
	var n atomic.Int64
	log, err := os.Create(fmt.Sprintf("%s/heap-%d.txt", dir, os.Getpid()))
	if err != nil {
		return func() {}
	}
	go func() {
		defer log.Close()
		var peak int64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			st := memory.status()
			if st == nil || st.PeakOutsideKDF < peak+(4<<20) {
				continue
			}
			peak = st.PeakOutsideKDF
			rss := st.RSS
			f, err := os.Create(fmt.Sprintf("%s/heap-%d-%03d-%dMiB.pprof", dir, os.Getpid(), n.Add(1), rss>>20))
			if err != nil {
				return
			}
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
			// What lies outside Go's heap (the binary's pages, C's heap
			// for SQLite) shows only in the kernel's map of the process.
			if smaps, err := os.ReadFile("/proc/self/smaps"); err == nil {
				_ = os.WriteFile(fmt.Sprintf("%s/heap-%d-%03d.smaps", dir, os.Getpid(), n.Load()), smaps, 0o600)
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Fprintf(log, "heapdump %d rss=%dMiB heapinuse=%dMiB heapidle-unreleased=%dMiB stacks=%dMiB gosys=%dMiB nextgc=%dMiB\n", os.Getpid(), rss>>20, ms.HeapInuse>>20, (ms.HeapIdle-ms.HeapReleased)>>20, ms.StackSys>>20, ms.Sys>>20, ms.NextGC>>20)
		}
	}()
	return func() { close(done) }
}
