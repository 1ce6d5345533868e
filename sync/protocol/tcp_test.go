package protocol

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
)

// tcpPair returns both ends of a real TCP connection on 127.0.0.1.
func tcpPair(tb testing.TB) (client, server net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	acceptErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			acceptErr <- err
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	select {
	case server = <-accepted:
	case err := <-acceptErr:
		tb.Fatal(err)
	}
	return client, server
}

// chunkOf is the content test models serve: deterministic per offset.
func chunkOf(offset int64, size uint32) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(offset>>12) ^ byte(i*31)
	}
	return b
}

func TestSessionOverTCP(t *testing.T) {
	client, server := tcpPair(t)
	ra, rb := exchangeBoth(context.Background(), client, server,
		&Hello{DeviceName: "client"}, &Hello{DeviceName: "server"})
	if ra.err != nil || rb.err != nil {
		t.Fatalf("hello: %v / %v", ra.err, rb.err)
	}
	if ra.hello.GetDeviceName() != "server" || rb.hello.GetDeviceName() != "client" {
		t.Fatalf("hellos: %v / %v", ra.hello, rb.hello)
	}
	a, b := pairOver(t, client, server, Options{})
	b.model.answer = func(_ context.Context, req *Request) ([]byte, error) {
		return chunkOf(req.GetOffset(), req.GetSize()), nil
	}

	// A large index, batched, arrives whole and in order.
	var files []*FileInfo
	for i := range 30_000 {
		files = append(files, testFile(i, 1+i%8))
	}
	batches := BatchFiles(files, 0)
	ctx := context.Background()
	for i, batch := range batches {
		var err error
		if i == 0 {
			err = a.conn.Index(ctx, &Index{Folder: "photos", Files: batch})
		} else {
			err = a.conn.IndexUpdate(ctx, &IndexUpdate{Folder: "photos", Files: batch})
		}
		if err != nil {
			t.Fatalf("sending batch %d: %v", i, err)
		}
	}
	var got []*FileInfo
	for i := range batches {
		switch m := b.model.next(t).(type) {
		case *Index:
			if i != 0 {
				t.Fatalf("Index as message %d", i)
			}
			got = append(got, m.GetFiles()...)
		case *IndexUpdate:
			got = append(got, m.GetFiles()...)
		}
	}
	if len(got) != len(files) {
		t.Fatalf("received %d files, sent %d", len(got), len(files))
	}
	for i := range files {
		if !proto.Equal(got[i], files[i]) {
			t.Fatalf("file %d differs", i)
		}
	}

	// Many chunk requests at once, in both directions' worth of traffic.
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			off, size := int64(i)<<20, uint32(128<<10+i*1000)
			data, err := a.conn.Request(ctx, &Request{Folder: "photos", Name: "big", Offset: off, Size: size})
			if err == nil && !bytes.Equal(data, chunkOf(off, size)) {
				err = fmt.Errorf("request %d: wrong data", i)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := a.conn.Close("done"); err != nil {
		t.Fatal(err)
	}
	a.checkClosedOnce(t)
	b.checkClosedOnce(t)
}
