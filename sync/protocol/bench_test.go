package protocol

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
)

// benchPair serves two Conns over loopback TCP until the benchmark ends.
func benchPair(b *testing.B, answer []byte) *Conn {
	b.Helper()
	client, server := tcpPair(b)
	ctx, cancel := context.WithCancel(context.Background())
	ma, mb := newRecordingModel(), newRecordingModel()
	mb.answer = func(context.Context, *Request) ([]byte, error) { return answer, nil }
	a := NewConn(DeviceID{1}, client, ma, Options{})
	c := NewConn(DeviceID{2}, server, mb, Options{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Serve(ctx) })
	wg.Go(func() { _ = c.Serve(ctx) })
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return a
}

// BenchmarkRequest256KiB measures chunk transfer over loopback TCP, with
// one request at a time and with many in flight.
func BenchmarkRequest256KiB(b *testing.B) {
	const size = 256 << 10
	chunk := bytes.Repeat([]byte{0xa5}, size)
	for _, inFlight := range []int{1, 16} {
		b.Run(map[int]string{1: "serial", 16: "16-in-flight"}[inFlight], func(b *testing.B) {
			conn := benchPair(b, chunk)
			b.SetBytes(size)
			b.ResetTimer()
			var wg sync.WaitGroup
			work := make(chan struct{})
			errs := make(chan error, inFlight)
			for range inFlight {
				wg.Go(func() {
					for range work {
						data, err := conn.Request(context.Background(), &Request{Name: "f", Size: size})
						if err == nil && len(data) != size {
							b.Errorf("got %d bytes", len(data))
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		})
	}
}

// benchIndex is an index of 10,000 realistic files (3 chunks each).
func benchIndex() *Index {
	idx := &Index{Folder: "photos"}
	for i := range 10_000 {
		idx.Files = append(idx.Files, testFile(i, 3))
	}
	return idx
}

func BenchmarkIndexEncode10k(b *testing.B) {
	idx := benchIndex()
	var buf bytes.Buffer
	if err := WriteMessage(&buf, idx); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(proto.Size(idx)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		buf.Reset()
		if err := WriteMessage(&buf, idx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "frame-bytes")
}

func BenchmarkIndexDecode10k(b *testing.B) {
	idx := benchIndex()
	var buf bytes.Buffer
	if err := WriteMessage(&buf, idx); err != nil {
		b.Fatal(err)
	}
	frame := buf.Bytes()
	b.SetBytes(int64(proto.Size(idx)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := ReadMessage(bytes.NewReader(frame)); err != nil {
			b.Fatal(err)
		}
	}
}
