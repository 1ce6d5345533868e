package scan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const benchFiles = 10000

// smallTree writes benchFiles files of 1 KiB in 100 directories.
func smallTree(b *testing.B) string {
	root := b.TempDir()
	data := randBytes(7, 1<<10)
	for d := range 100 {
		dir := filepath.Join(root, fmt.Sprintf("dir%02d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range benchFiles / 100 {
			data[0], data[1] = byte(d), byte(f)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%03d", f)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return root
}

func reportFiles(b *testing.B, start time.Time) {
	b.ReportMetric(float64(benchFiles*b.N)/time.Since(start).Seconds(), "files/s")
}

// BenchmarkScanSmallFiles: a first scan of 10,000 small files, each read
// and hashed.
func BenchmarkScanSmallFiles(b *testing.B) {
	folder := openRoot(b, smallTree(b))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		res := scanDir(b, folder, newKnown(), nil, Options{})
		if len(res.recs) != benchFiles+100 {
			b.Fatalf("%d records", len(res.recs))
		}
	}
	reportFiles(b, start)
}

// BenchmarkRescanSmallFiles: a rescan of 10,000 unchanged files: listing
// and comparing with the index only.
func BenchmarkRescanSmallFiles(b *testing.B) {
	folder := openRoot(b, smallTree(b))
	known := newKnown()
	known.apply(scanDir(b, folder, known, nil, Options{}).recs)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if res := scanDir(b, folder, known, nil, Options{}); len(res.recs) != 0 {
			b.Fatalf("%d records", len(res.recs))
		}
	}
	reportFiles(b, start)
}

// BenchmarkScanLargeFile: one 256 MiB file. A file is cut by one worker
// (content-defined boundaries are found in order), so Workers=2 shows
// whether anything else in the pipeline costs.
func BenchmarkScanLargeFile(b *testing.B) {
	root := b.TempDir()
	const size = 256 << 20
	writeFile(b, root, "large", randBytes(3, size), 0o644)
	folder := openRoot(b, root)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				res := scanDir(b, folder, newKnown(), nil, Options{Workers: workers})
				if res.recs["large"].Size != size {
					b.Fatal("wrong size")
				}
			}
		})
	}
}

// BenchmarkMatchWorstCase: the largest pattern against a long name.
func BenchmarkMatchWorstCase(b *testing.B) {
	pat := "/" + strings.Repeat("**/a*", MaxWildcards/2)
	pat += strings.Repeat("x", MaxLineLen-len(pat))
	m, err := ParseIgnore(strings.NewReader(pat))
	if err != nil {
		b.Fatal(err)
	}
	name := strings.Repeat("a/", 1000) + strings.Repeat("a", 2000)
	b.ResetTimer()
	for range b.N {
		m.Match(name, false)
	}
}
