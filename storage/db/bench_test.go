package db

import (
	"context"
	"fmt"
	"testing"
)

// benchRecords returns n file records shaped like real ones: a version
// vector of a few bytes and a chunk list of a few hashes.
func benchRecords(n int) []FileRecord {
	recs := make([]FileRecord, n)
	version := make([]byte, 24)
	chunks := make([]byte, 3*36)
	for i := range recs {
		recs[i] = FileRecord{Name: fmt.Sprintf("dir%03d/file%06d.txt", i%1000, i), Type: TypeFile,
			Size: int64(i) * 1000, Mode: 0o644, ModTime: at(i), Version: version, Chunks: chunks,
			Sequence: int64(i + 1)}
	}
	return recs
}

// BenchmarkPutFiles10k inserts 10,000 new file records of this node in
// one transaction per iteration.
func BenchmarkPutFiles10k(b *testing.B) { benchPutFiles(b, LocalDevice, 10_000) }

// BenchmarkPutPeerFiles10k is BenchmarkPutFiles10k for a peer's records,
// which the sequence index leaves out.
func BenchmarkPutPeerFiles10k(b *testing.B) {
	benchPutFiles(b, "7777777-7777777-7777777-7777777-7777777-7777777-7777777-7777777", 10_000)
}

// BenchmarkPutFilesBatches inserts 10,000 records of this node 50 at a
// time, as a pull records what it placed and a peer's index updates
// arrive: each transaction's fixed costs count.
func BenchmarkPutFilesBatches(b *testing.B) { benchPutFiles(b, LocalDevice, 50) }

// benchPutFiles inserts 10,000 new records of device, batch in each
// transaction, into a fresh folder each iteration, with a context that
// can end, as a node's are.
func benchPutFiles(b *testing.B, device string, batch int) {
	const n = 10_000
	db, _ := openTest(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recs := benchRecords(n)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		folder := fmt.Sprintf("f%d", i)
		must(b, db.PutFolder(ctx, Folder{ID: folder, Path: "/f", Type: SendReceive}))
		b.StartTimer()
		for j := 0; j < n; j += batch {
			must(b, db.PutFiles(ctx, folder, device, recs[j:min(j+batch, n)]))
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkFilesSince10k reads back 10,000 file records by sequence.
func BenchmarkFilesSince10k(b *testing.B) {
	const n = 10_000
	db, _ := openTest(b)
	ctx := context.Background()
	must(b, db.PutFolder(ctx, Folder{ID: "f", Path: "/f", Type: SendReceive}))
	must(b, db.PutFiles(ctx, "f", LocalDevice, benchRecords(n)))
	b.ResetTimer()
	for range b.N {
		count := 0
		must(b, db.FilesSince(ctx, "f", LocalDevice, 0, func(FileRecord) error {
			count++
			return nil
		}))
		if count != n {
			b.Fatalf("read %d records, want %d", count, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkPutDevice measures one small write transaction.
func BenchmarkPutDevice(b *testing.B) {
	db, _ := openTest(b)
	ctx := context.Background()
	for i := range b.N {
		must(b, db.PutDevice(ctx, Device{ID: fmt.Sprintf("D%d", i%100), Name: "n"}))
	}
}

// BenchmarkDeviceParallel measures point reads from many goroutines.
func BenchmarkDeviceParallel(b *testing.B) {
	db, _ := openTest(b)
	ctx := context.Background()
	must(b, db.PutDevice(ctx, Device{ID: "D", Addresses: []string{"tcp://127.0.0.1:1"}}))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := db.Device(ctx, "D"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
