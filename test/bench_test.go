package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lockstep/storage/blob/s3/s3test"
	"lockstep/test/testutil"
	"lockstep/web"
)

// The sync benchmarks run real nodes on loopback and report whole-process
// figures. Run them with:
//
//	go test -run '^$' -bench Sync -benchtime 1x ./test/
//
// Each reports seconds (and MB/s where it applies); they are measurements,
// not assertions.

// folderStatus reads one folder's status from a node.
type folderStatusJSON struct {
	State        string `json:"state"`
	LocalFiles   int64  `json:"localFiles"`
	GlobalFiles  int64  `json:"globalFiles"`
	NeedFiles    int64  `json:"needFiles"`
	PulledBytes  int64  `json:"pulledBytes"`
	PulledBlocks int64  `json:"pulledBlocks"`
	ReusedBytes  int64  `json:"reusedBytes"`
	HashedBytes  int64  `json:"hashedBytes"`
}

func (n *node) folder(tb testing.TB) folderStatusJSON {
	var st struct {
		Folders []folderStatusJSON `json:"folders"`
	}
	n.get("/rest/status", &st)
	if len(st.Folders) != 1 {
		tb.Fatalf("%s has %d folders", n.name, len(st.Folders))
	}
	return st.Folders[0]
}

// peakRSS is the node's peak resident set size in bytes (VmHWM).
func (n *node) peakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// memory is the node's memory now (also what LOCKSTEP_MEMSTATS writes
// for a command).
func (n *node) memory() web.MemoryStatus {
	var st struct {
		Memory web.MemoryStatus `json:"memory"`
	}
	n.get("/rest/status", &st)
	return st.Memory
}

// reportMemory reports a process's peaks, in MB: overall as
// MB-rss-NAME and outside scrypt as MB-rss-NAME-ex-kdf.
func reportMemory(b *testing.B, name string, m web.MemoryStatus) {
	b.ReportMetric(float64(m.Peak)/(1<<20), "MB-rss-"+name)
	b.ReportMetric(float64(m.PeakOutsideKDF)/(1<<20), "MB-rss-"+name+"-ex-kdf")
}

// runMeasured runs the binary like mustRun and returns the memory it
// reported at exit (LOCKSTEP_MEMSTATS).
func runMeasured(b *testing.B, home string, args ...string) web.MemoryStatus {
	b.Helper()
	path := filepath.Join(b.TempDir(), "memstats.json")
	cmd := command(context.Background(), "", append([]string{"--home", home}, args...)...)
	env := debugEnv("cli-" + args[0])
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env, "LOCKSTEP_MEMSTATS="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("lockstep %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var m web.MemoryStatus
	raw, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err != nil {
		b.Fatalf("lockstep %s: its memory: %v", strings.Join(args, " "), err)
	}
	return m
}

// cpuSeconds is the CPU time (user and system) n's process has used so
// far. The benchmarks report it per node, because on a machine this busy
// the seconds a change saves show first as CPU, long before the wall clock
// rises above its noise.
func (n *node) cpuSeconds() float64 { return testutil.CPUSeconds(n.cmd.Process.Pid) }

// pairWithFolder starts two nodes and shares folder "f" from a's dir
// (already filled) to b; it returns when the share is configured.
func pairWithFolder(b *testing.B, aDir, bDir string) (*node, *node) {
	na, nb := startPair(b)
	shareFolder(na, nb, aDir, bDir)
	return na, nb
}

// startPair starts two connected nodes.
func startPair(b *testing.B) (*node, *node) {
	na, nb := startNode(b, "a"), startNode(b, "b")
	na.cli("device", "add", nb.ID, "--address", nb.Listen)
	nb.cli("device", "add", na.ID, "--address", na.Listen)
	testutil.Eventually(b, 30*time.Second, "nodes to connect", func() bool { return na.connectedTo(nb.ID) })
	return na, nb
}

// shareFolder adds folder "f" on both and shares it.
func shareFolder(na, nb *node, aDir, bDir string) {
	na.cli("folder", "add", "f", aDir)
	nb.cli("folder", "add", "f", bDir)
	na.cli("folder", "share", "f", nb.ID)
	nb.cli("folder", "share", "f", na.ID)
}

func waitComplete(b *testing.B, n *node, files int64) {
	testutil.Eventually(b, 10*time.Minute, "sync to complete", func() bool {
		st := n.folder(b)
		return st.NeedFiles == 0 && st.LocalFiles == files && st.GlobalFiles == files
	})
}

func BenchmarkSyncSmallFiles(b *testing.B) {
	const count = 10000
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		aDir, bDir := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		smallSet(b, aDir)
		na, nb := startPair(b)
		settle()
		b.StartTimer()
		start := time.Now()
		shareFolder(na, nb, aDir, bDir)
		waitComplete(b, nb, count) // files; the 100 directories are counted apart
		secs := time.Since(start).Seconds()
		b.StopTimer()
		b.ReportMetric(secs, "s")
		b.ReportMetric(float64(count)/secs, "files/s")
		b.ReportMetric(float64(na.peakRSS())/(1<<20), "MB-rss-a")
		b.ReportMetric(float64(nb.peakRSS())/(1<<20), "MB-rss-b")
		na.stop()
		nb.stop()
	}
}

// BenchmarkSyncManyFiles syncs LOCKSTEP_BENCH_FILES small files (1-4 KiB,
// 100,000 by default) in count/100 directories between two trusted nodes,
// from the share (the first node's scan included) to the second node
// complete. Beside it, `cp -a` of the same tree followed by `sync`: the
// machine's own cost of writing it (x-cp is the ratio). Then the median
// time for an edited file to arrive at that size, the nodes' peak memory
// and their databases' sizes.
func BenchmarkSyncManyFiles(b *testing.B) {
	count := benchFiles(b)
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		aDir, bDir := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		for i := range count {
			writeFile(b, filepath.Join(aDir, fmt.Sprintf("d%04d/f%07d", i%max(count/100, 1), i)), randomBytes(uint64(i), 1024+i%3072), 0o644)
		}
		settle()
		start := time.Now()
		if out, err := exec.Command("cp", "-a", aDir, filepath.Join(dir, "cp")).CombinedOutput(); err != nil {
			b.Fatalf("cp -a: %v\n%s", err, out)
		}
		settle()
		cpSecs := time.Since(start).Seconds()

		na, nb := startPair(b)
		settle()
		b.StartTimer()
		start, cpuA, cpuB := time.Now(), na.cpuSeconds(), nb.cpuSeconds()
		shareFolder(na, nb, aDir, bDir)
		waitComplete(b, nb, int64(count))
		secs := time.Since(start).Seconds()
		b.StopTimer()
		b.ReportMetric(secs, "s")
		b.ReportMetric(float64(count)/secs, "files/s")
		b.ReportMetric(cpSecs, "s-cp")
		b.ReportMetric(secs/cpSecs, "x-cp")
		b.ReportMetric(na.cpuSeconds()-cpuA, "cpu-s-a")
		b.ReportMetric(nb.cpuSeconds()-cpuB, "cpu-s-b")

		// An edit at this size, five times; the median.
		var lat []time.Duration
		for i := range 5 {
			name := fmt.Sprintf("d%04d/f%07d", i, i*max(count/100, 1)+i)
			want := []byte(fmt.Sprintf("edit %d at %d", i, time.Now().UnixNano()))
			start := time.Now()
			writeFile(b, filepath.Join(aDir, name), want, 0o644)
			for {
				got, err := os.ReadFile(filepath.Join(bDir, name))
				if err == nil && bytes.Equal(got, want) {
					break
				}
				if time.Since(start) > time.Minute {
					b.Fatalf("the edit of %s did not arrive within a minute", name)
				}
				time.Sleep(2 * time.Millisecond)
			}
			lat = append(lat, time.Since(start))
			time.Sleep(200 * time.Millisecond)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-edit")

		reportMemory(b, "a", na.memory())
		reportMemory(b, "b", nb.memory())
		b.ReportMetric(float64(dbSize(b, na.home))/1e6, "MB-db-a")
		b.ReportMetric(float64(dbSize(b, nb.home))/1e6, "MB-db-b")
		na.stop()
		nb.stop()
	}
}

// benchFiles is LOCKSTEP_BENCH_FILES, 100,000 by default: how many small
// files the benchmarks of many files use.
func benchFiles(b *testing.B) int {
	s := os.Getenv("LOCKSTEP_BENCH_FILES")
	if s == "" {
		return 100000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("LOCKSTEP_BENCH_FILES=%q", s)
	}
	return n
}

// dbSize is the bytes of a node's database, its write-ahead log
// included.
func dbSize(b *testing.B, home string) int64 {
	var n int64
	matches, _ := filepath.Glob(filepath.Join(home, "lockstep.db*"))
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil {
			n += fi.Size()
		}
	}
	if n == 0 {
		b.Fatalf("no database in %s", home)
	}
	return n
}

func BenchmarkSyncLargeFiles(b *testing.B) {
	const size = 256 << 20
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		aDir, bDir := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		largeSet(b, aDir)
		na, nb := startPair(b)
		settle()
		b.StartTimer()
		start, cpuA, cpuB := time.Now(), na.cpuSeconds(), nb.cpuSeconds()
		shareFolder(na, nb, aDir, bDir)
		waitComplete(b, nb, 4)
		secs := time.Since(start).Seconds()
		b.StopTimer()
		b.ReportMetric(secs, "s")
		b.ReportMetric(4*size/secs/1e6, "MB/s")
		b.ReportMetric(na.cpuSeconds()-cpuA, "cpu-s-a")
		b.ReportMetric(nb.cpuSeconds()-cpuB, "cpu-s-b")
		b.ReportMetric(float64(na.peakRSS())/(1<<20), "MB-rss-a")
		b.ReportMetric(float64(nb.peakRSS())/(1<<20), "MB-rss-b")
		na.stop()
		nb.stop()
	}
}

// BenchmarkSyncLatency is the time from a small write on one node to the
// new content on the other, median of 20 writes.
func BenchmarkSyncLatency(b *testing.B) {
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		aDir, bDir := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		writeFile(b, filepath.Join(aDir, "seed.txt"), []byte("seed"), 0o644)
		na, nb := pairWithFolder(b, aDir, bDir)
		waitComplete(b, nb, 1)
		var lat []time.Duration
		for i := range 20 {
			want := []byte(fmt.Sprintf("edit %d at %d", i, time.Now().UnixNano()))
			start := time.Now()
			writeFile(b, filepath.Join(aDir, "note.txt"), want, 0o644)
			// Polled every 2 ms, not with Eventually: the poll's
			// resolution is the measurement's.
			for {
				got, err := os.ReadFile(filepath.Join(bDir, "note.txt"))
				if err == nil && bytes.Equal(got, want) {
					break
				}
				if time.Since(start) > time.Minute {
					b.Fatal("edit did not arrive within a minute")
				}
				time.Sleep(2 * time.Millisecond)
			}
			lat = append(lat, time.Since(start))
			time.Sleep(100 * time.Millisecond) // edits apart, so each is synced on its own
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
		na.stop()
		nb.stop()
	}
}

// BenchmarkSyncInsertByte inserts one byte at the start of a synced
// 256 MiB file and reports the time to converge and the bytes fetched from
// the peer.
func BenchmarkSyncInsertByte(b *testing.B) {
	const size = 256 << 20
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		aDir, bDir := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		data := randomBytes(9, size)
		writeFile(b, filepath.Join(aDir, "large.bin"), data, 0o644)
		na, nb := pairWithFolder(b, aDir, bDir)
		waitComplete(b, nb, 1)
		st0 := nb.folder(b)
		edited := append([]byte{'!'}, data...)
		// Saved the way editors save (write aside, rename over), so one
		// version is scanned, and timed from the save: writing 256 MiB is
		// not lockstep's work.
		aside := filepath.Join(dir, "large.bin.new")
		writeFile(b, aside, edited, 0o644)
		settle()
		start := time.Now()
		if err := os.Rename(aside, filepath.Join(aDir, "large.bin")); err != nil {
			b.Fatal(err)
		}
		testutil.Eventually(b, 5*time.Minute, "the edit to arrive", func() bool {
			fi, err := os.Stat(filepath.Join(bDir, "large.bin"))
			if err != nil || fi.Size() != size+1 {
				return false
			}
			st := nb.folder(b)
			return st.NeedFiles == 0
		})
		secs := time.Since(start).Seconds()
		got, _ := os.ReadFile(filepath.Join(bDir, "large.bin"))
		if !bytes.Equal(got, edited) {
			b.Fatal("content differs after the insert")
		}
		st := nb.folder(b)
		b.ReportMetric(secs, "s")
		b.ReportMetric(float64(st.PulledBytes-st0.PulledBytes), "bytes-pulled")
		b.ReportMetric(float64(st.PulledBlocks-st0.PulledBlocks), "chunks-pulled")
		b.ReportMetric(float64(st.ReusedBytes), "bytes-reused")
		na.stop()
		nb.stop()
	}
}

// settle flushes what the benchmark wrote before it starts timing: the
// data set was just written and is still dirty in the page cache, and
// whichever node first syncs the filesystem (syncfs) would otherwise pay for
// writing it out.
func settle() { syscall.Sync() }

// smallSet writes the benchmarks' 10,000 small files under dir, in 100
// directories, and returns their bytes.
func smallSet(tb testing.TB, dir string) (bytes int64) {
	for i := range 10000 {
		data := randomBytes(uint64(i), 512+i%3000)
		bytes += int64(len(data))
		writeFile(tb, filepath.Join(dir, fmt.Sprintf("d%03d/f%05d.txt", i%100, i)), data, 0o644)
	}
	return bytes
}

// largeSet writes the benchmarks' 4 × 256 MiB files under dir and returns
// their bytes.
func largeSet(tb testing.TB, dir string) (bytes int64) {
	for i := range 4 {
		writeFile(tb, filepath.Join(dir, fmt.Sprintf("large%d.bin", i)), randomBytes(uint64(100+i), 256<<20), 0o644)
		bytes += 256 << 20
	}
	return bytes
}

// standardSet writes the benchmarks' standard set under dir, 10,000 small
// files and 4 × 256 MiB, and returns its file count (directories left out,
// as the status counts them) and bytes.
// LOCKSTEP_BENCH_SET=small or large writes only that half, for measuring
// the two apart.
func standardSet(tb testing.TB, dir string) (files int64, bytes int64) {
	set := os.Getenv("LOCKSTEP_BENCH_SET")
	if set != "large" {
		files += 10000 // the 100 directories are counted apart
		bytes += smallSet(tb, dir)
	}
	if set != "small" {
		files += 4
		bytes += largeSet(tb, dir)
	}
	return files, bytes
}

// BenchmarkReceiverIngest is the time for a receiver (local store) to take
// the standard set from a trusted device, from the share command to the
// device seeing the receiver complete; then the time for a new device to
// recover it from the receiver, and for checks of it (the trusted
// device's, without and with reading the data, and the receiver's own).
func BenchmarkReceiverIngest(b *testing.B) {
	benchReceiverIngest(b, nil)
}

// benchStore is a receiver store other than its local one: a server's
// CPU time, and the flags that give a new run its fresh bucket.
type benchStore struct {
	cpuSeconds func() float64
	args       func() []string
}

// BenchmarkReceiverIngestS3 is BenchmarkReceiverIngest with the receiver's
// store in a bucket of versitygw on the same machine (storage/blob/s3/s3test),
// and the store's requests of each kind (its storeUsage) reported per phase:
// put-n, get-n, head-n, list-n, delete-n and put-MB, get-MB for the ingest,
// the same with the suffix -recover for the recovery.
func BenchmarkReceiverIngestS3(b *testing.B) {
	srv := s3test.NewServer(b)
	benchReceiverIngest(b, &benchStore{srv.CPUSeconds, func() []string {
		cfg := srv.Bucket(b)
		b.Setenv("LOCKSTEP_S3_ACCESS_KEY", cfg.AccessKey)
		b.Setenv("LOCKSTEP_S3_SECRET_KEY", cfg.SecretKey)
		return []string{"--s3-endpoint", cfg.Endpoint, "--s3-bucket", cfg.Bucket, "--s3-insecure"}
	}})
}

// BenchmarkReceiverIngestS3TLS is BenchmarkReceiverIngestS3 over HTTPS,
// as S3 is used: the server's certificate from a private authority given
// with --s3-ca-file. Over HTTPS the client sends payloads unsigned (TLS
// protects them), where over plain HTTP it signs each one.
func BenchmarkReceiverIngestS3TLS(b *testing.B) {
	srv := s3test.NewServerWith(b, s3test.Options{TLS: true})
	benchReceiverIngest(b, &benchStore{srv.CPUSeconds, func() []string {
		cfg := srv.Bucket(b)
		b.Setenv("LOCKSTEP_S3_ACCESS_KEY", cfg.AccessKey)
		b.Setenv("LOCKSTEP_S3_SECRET_KEY", cfg.SecretKey)
		return []string{"--s3-endpoint", cfg.Endpoint, "--s3-bucket", cfg.Bucket, "--s3-ca-file", cfg.CAFile}
	}})
}

// benchReceiverIngest runs the receiver benchmark, with the receiver's
// store in store (nil: its local store). A store's server's CPU time is
// reported as cpu-s-store and cpu-s-store-recover.
func benchReceiverIngest(b *testing.B, store *benchStore) {
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		src := filepath.Join(dir, "a")
		files, total := standardSet(b, src)
		var rArgs []string
		storeCPU := func() float64 { return 0 }
		if store != nil {
			rArgs, storeCPU = store.args(), store.cpuSeconds
		}
		a, r := startNode(b, "a"), startNode(b, "r", rArgs...)
		a.cli("folder", "add", "f", src)
		testutil.Eventually(b, 10*time.Minute, "a to scan", func() bool { return a.folder(b).LocalFiles == files })
		holdFolder(b, r, "f", a)
		pw := passwordFile(b, "benchmark password")
		a.cli("device", "add", r.ID, "--address", r.Listen, "--untrusted")
		testutil.Eventually(b, 30*time.Second, "a connected to r", func() bool { return a.connectedTo(r.ID) })
		settle()
		use0 := r.storeUsage()
		b.StartTimer()
		start, cpuA, cpuR, cpuS := time.Now(), a.cpuSeconds(), r.cpuSeconds(), storeCPU()
		a.cli("folder", "share", "f", r.ID, "--password-file", pw)
		shared := time.Since(start).Seconds()
		testutil.Eventually(b, 10*time.Minute, "r to hold everything", func() bool {
			c, _, _ := a.encFolder("f").peer(r.ID)
			return c == 100
		})
		secs := time.Since(start).Seconds()
		b.StopTimer()
		st := r.encFolder("f").Receiver
		b.ReportMetric(secs, "s")
		b.ReportMetric(float64(total)/secs/1e6, "MB/s")
		b.ReportMetric(shared, "s-share")
		b.ReportMetric(a.cpuSeconds()-cpuA, "cpu-s-a")
		b.ReportMetric(r.cpuSeconds()-cpuR, "cpu-s-r")
		b.ReportMetric(float64(st.StoredBytes)/float64(total), "stored/plain")
		reportMemory(b, "a", a.memory())
		reportMemory(b, "r", r.memory())
		use1 := r.storeUsage()
		if store != nil {
			b.ReportMetric(storeCPU()-cpuS, "cpu-s-store")
			reportStoreUsage(b, use1.minus(use0), "")
		}

		newHome := newDeviceFor(b, r, "f")
		dst := filepath.Join(dir, "recovered")
		settle()
		use1 = r.storeUsage()
		cpuR, cpuS = r.cpuSeconds(), storeCPU()
		start = time.Now()
		rm := runMeasured(b, newHome, recoverArgs(r, "f", pw, dst)...)
		rsecs := time.Since(start).Seconds()
		reportMemory(b, "recover", rm)
		reportMemory(b, "r-after-recover", r.memory())
		b.ReportMetric(rsecs, "s-recover")
		b.ReportMetric(float64(total)/rsecs/1e6, "MB/s-recover")
		b.ReportMetric(r.cpuSeconds()-cpuR, "cpu-s-r-recover")
		if store != nil {
			b.ReportMetric(storeCPU()-cpuS, "cpu-s-store-recover")
			reportStoreUsage(b, r.storeUsage().minus(use1), "-recover")
		}

		// Checks of the same store: a's metadata check, a's check reading
		// every chunk, and r's check of its own store.
		for _, c := range []struct {
			n      *node
			metric string
			args   []string
		}{
			{a, "check", []string{"check", "f"}},
			{a, "check-read-data", []string{"check", "f", "--read-data"}},
			{r, "check-store", []string{"check", "f"}},
		} {
			settle()
			start = time.Now()
			mustRun(b, c.n.home, c.args...)
			csecs := time.Since(start).Seconds()
			b.ReportMetric(csecs, "s-"+c.metric)
			if c.metric == "check-read-data" {
				b.ReportMetric(float64(total)/csecs/1e6, "MB/s-"+c.metric)
			}
		}
		a.stop()
		r.stop()
	}
}

// storeCounts are one kind's figures of a node's storeUsage.
type storeCounts struct {
	Requests int64 `json:"requests"`
	Bytes    int64 `json:"bytes"`
}

// storeUsageJSON is the storeUsage of a node's /rest/status: the blob
// store's calls of each kind since the node started.
type storeUsageJSON struct {
	Put    storeCounts `json:"put"`
	Get    storeCounts `json:"get"`
	Head   storeCounts `json:"head"`
	List   storeCounts `json:"list"`
	Delete storeCounts `json:"delete"`
}

func (n *node) storeUsage() storeUsageJSON {
	var st struct {
		StoreUsage storeUsageJSON `json:"storeUsage"`
	}
	n.get("/rest/status", &st)
	return st.StoreUsage
}

// minus is the usage between old and u.
func (u storeUsageJSON) minus(old storeUsageJSON) storeUsageJSON {
	d := func(a, b storeCounts) storeCounts { return storeCounts{a.Requests - b.Requests, a.Bytes - b.Bytes} }
	return storeUsageJSON{d(u.Put, old.Put), d(u.Get, old.Get), d(u.Head, old.Head), d(u.List, old.List), d(u.Delete, old.Delete)}
}

// reportStoreUsage reports u's request counts, and the bytes put and
// got, as metrics whose names end in suffix.
func reportStoreUsage(b *testing.B, u storeUsageJSON, suffix string) {
	for _, k := range []struct {
		name string
		c    storeCounts
	}{{"put", u.Put}, {"get", u.Get}, {"head", u.Head}, {"list", u.List}, {"delete", u.Delete}} {
		b.ReportMetric(float64(k.c.Requests), k.name+"-n"+suffix)
	}
	b.ReportMetric(float64(u.Put.Bytes)/1e6, "put-MB"+suffix)
	b.ReportMetric(float64(u.Get.Bytes)/1e6, "get-MB"+suffix)
}

// BenchmarkCheckManyFiles is the time of a trusted device's metadata check
// of a receiver holding LOCKSTEP_BENCH_FILES small files (100,000 by
// default) in 1,000 directories, and of the receiver's check of its store.
func BenchmarkCheckManyFiles(b *testing.B) {
	count := benchFiles(b)
	for range b.N {
		b.StopTimer()
		src := filepath.Join(b.TempDir(), "a")
		for i := range count {
			writeFile(b, filepath.Join(src, fmt.Sprintf("d%03d/f%06d", i%1000, i)), randomBytes(uint64(i), 1024+i%3072), 0o644)
		}
		a, r := startNode(b, "a"), startNode(b, "r")
		a.cli("folder", "add", "f", src)
		testutil.Eventually(b, 30*time.Minute, "a to scan", func() bool { return a.folder(b).LocalFiles == int64(count) })
		holdFolder(b, r, "f", a)
		backUpTo(b, a, r, "f", passwordFile(b, "benchmark password"))
		testutil.Eventually(b, 30*time.Minute, "r to hold everything", func() bool {
			c, _, _ := a.encFolder("f").peer(r.ID)
			return c == 100
		})
		b.StartTimer()
		start := time.Now()
		mustRun(b, a.home, "check", "f")
		b.ReportMetric(time.Since(start).Seconds(), "s-check")
		b.ReportMetric(float64(a.peakRSS())/(1<<20), "MB-rss-a")
		start = time.Now()
		mustRun(b, r.home, "check", "f")
		b.ReportMetric(time.Since(start).Seconds(), "s-check-store")
		b.StopTimer()
		a.stop()
		r.stop()
	}
}
