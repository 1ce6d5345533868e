package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/storage/blob/metered"
	"lockstep/storage/blob/s3"
	"lockstep/storage/blob/s3/s3test"
	"lockstep/test/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func open(t testing.TB, cfg s3.Config) *s3.Store {
	t.Helper()
	s, err := s3.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	srv := s3test.NewServer(t)
	blobtest.Run(t, func(t *testing.T) blob.Store { return open(t, srv.Bucket(t)) })
}

// TestConformanceTLS runs the suite over HTTPS, where the client sends
// payloads unsigned: a body cut short must still leave no blob.
func TestConformanceTLS(t *testing.T) {
	srv := s3test.NewServerWith(t, s3test.Options{TLS: true})
	blobtest.Run(t, func(t *testing.T) blob.Store { return open(t, srv.Bucket(t)) })
}

func TestConformanceWithPrefix(t *testing.T) {
	srv := s3test.NewServer(t)
	blobtest.Run(t, func(t *testing.T) blob.Store {
		cfg := srv.Bucket(t)
		cfg.Prefix = "/receiver/folder-1/"
		return open(t, cfg)
	})
}

// rawClient returns a plain minio client for cfg, to look behind the Store.
func rawClient(t *testing.T, cfg s3.Config) *minio.Client {
	t.Helper()
	tr, err := minio.DefaultTransport(false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""), Region: cfg.Region, Transport: tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return c
}

func listAll(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	keys := []string{}
	if err := s.List(t.Context(), prefix, func(i blob.Info) error {
		keys = append(keys, i.Key)
		return nil
	}); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func TestPrefixes(t *testing.T) {
	cfg := s3test.Start(t)
	a, b := cfg, cfg
	a.Prefix, b.Prefix = "r/a", "r/ab"
	sa, sb, root := open(t, a), open(t, b), open(t, cfg)
	for _, s := range []*s3.Store{sa, sb} {
		if err := s.Put(t.Context(), "k", strings.NewReader("v"), 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := listAll(t, sa, ""); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("List under prefix r/a = %q", got)
	}
	if got := listAll(t, root, ""); !slices.Equal(got, []string{"r/a/k", "r/ab/k"}) {
		t.Fatalf("List of the bucket = %q", got)
	}
	// Objects with names that are not keys are skipped.
	raw := rawClient(t, cfg)
	for _, name := range []string{"r/a/UPPER", "r/a/x y", "r/a/.hidden"} {
		if _, err := raw.PutObject(t.Context(), cfg.Bucket, name, strings.NewReader("f"), 1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := listAll(t, sa, ""); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("List with foreign objects = %q", got)
	}
}

func TestNoBucket(t *testing.T) {
	cfg := s3test.Start(t)
	cfg.Bucket = "no-such-bucket"
	if _, err := s3.New(t.Context(), cfg); !errors.Is(err, s3.ErrNoBucket) {
		t.Fatalf("New with a missing bucket = %v, want ErrNoBucket", err)
	}
	cfg = s3test.Start(t)
	cfg.SecretKey = "wrong"
	if _, err := s3.New(t.Context(), cfg); err == nil {
		t.Fatal("New with a wrong secret succeeded")
	}
}

// TestMultipart puts blobs larger than one part, with known and unknown
// sizes, and checks that a failure midway leaves neither a blob nor an
// unfinished upload.
func TestMultipart(t *testing.T) {
	cfg := s3test.Start(t)
	s := open(t, cfg)
	big := bytes.Repeat([]byte("0123456789abcdef"), (s3.PartSize+s3.PartSize/2)/16)
	for _, size := range []int64{int64(len(big)), -1} {
		if err := s.Put(t.Context(), "big", struct{ io.Reader }{bytes.NewReader(big)}, size); err != nil {
			t.Fatalf("Put of %d bytes (size %d): %v", len(big), size, err)
		}
		var got []byte
		if err := s.Get(t.Context(), "big", func(r io.Reader) (err error) { got, err = io.ReadAll(r); return err }); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, big) {
			t.Fatalf("Get returned %d bytes, want %d", len(got), len(big))
		}
	}
	errBroke := errors.New("broke after the first part")
	for _, size := range []int64{int64(len(big)), -1} {
		r := io.MultiReader(bytes.NewReader(big[:s3.PartSize+1000]), iotestErr{errBroke})
		if err := s.Put(t.Context(), "broken", r, size); !errors.Is(err, errBroke) {
			t.Fatalf("Put failing after the first part = %v, want its error", err)
		}
		if _, err := s.Stat(t.Context(), "broken"); !errors.Is(err, blob.ErrNotExist) {
			t.Fatalf("Stat after a failed multipart Put = %v", err)
		}
	}
	for u := range rawClient(t, cfg).ListIncompleteUploads(t.Context(), cfg.Bucket, "", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("unfinished upload left: %s", u.Key)
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

func BenchmarkPut256K(b *testing.B) {
	blobtest.BenchPut(b, open(b, s3test.Start(b)), 256<<10)
}

// TestConnectionsReused: bursts of 48 reads at once open connections for
// the first burst only; the next bursts find them idle. With the HTTP
// client's default of 16 idle connections a host, every burst opened 32
// new ones (over TLS, a handshake each).
func TestConnectionsReused(t *testing.T) {
	srv := s3test.NewServer(t)
	cfg, proxy := srv.Faulty(t, s3test.Faults{})
	s := open(t, cfg)
	if err := s.Put(t.Context(), "k", strings.NewReader("0123456789"), 10); err != nil {
		t.Fatal(err)
	}
	const n = 48
	burst := func() {
		var wg, inside sync.WaitGroup
		inside.Add(n)
		for range n {
			wg.Go(func() {
				in := false
				if err := blob.GetRange(t.Context(), s, "k", 2, 3, func(r io.Reader) error {
					in = true
					b, err := io.ReadAll(r)
					if err == nil && string(b) != "234" {
						err = fmt.Errorf("read %q", b)
					}
					// Every read holds its connection until all are in:
					// n connections at once.
					inside.Done()
					inside.Wait()
					return err
				}); err != nil {
					t.Error(err)
					if !in {
						inside.Done()
					}
				}
			})
		}
		wg.Wait()
	}
	burst()
	first := proxy.Counts().Conns
	for range 3 {
		burst()
	}
	if first < n/2 {
		t.Fatalf("a burst of %d reads at once opened only %d connections: they did not overlap", n, first)
	}
	if again := proxy.Counts().Conns - first; again > 4 {
		t.Fatalf("3 more bursts of %d reads opened %d connections, after %d for the first", n, again, first)
	}
}

// wrapped is a layer's wrapper around a body (blob.BodyWrapper), like a
// bandwidth limit's: it counts the bytes read through it, and does not
// seek.
type wrapped struct {
	r io.Reader
	n int64
}

func (w *wrapped) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	w.n += int64(n)
	return n, err
}

func (w *wrapped) Unwrap() io.Reader { return w.r }

// countingSeeker is a body that seeks, counting the bytes read from it.
type countingSeeker struct {
	*bytes.Reader
	n int64
}

func (c *countingSeeker) Read(p []byte) (int, error) {
	n, err := c.Reader.Read(p)
	c.n += int64(n)
	return n, err
}

// TestChecksumPassUnderLayers: the CRC32C of a body is read from the body
// under the layers' wrappers, which see each byte once, as it is sent: a
// metered store counted every PUT twice, and an upload limit paced the
// checksum's pass, not the PUT, which then went out unpaced.
func TestChecksumPassUnderLayers(t *testing.T) {
	s := open(t, s3test.Start(t))
	body := bytes.Repeat([]byte("0123456789"), 1000)
	inner := &countingSeeker{Reader: bytes.NewReader(body)}
	w := &wrapped{r: inner}
	if err := s.Put(t.Context(), "k", w, int64(len(body))); err != nil {
		t.Fatal(err)
	}
	if w.n != int64(len(body)) || inner.n != 2*int64(len(body)) {
		t.Errorf("%d bytes read through the wrapper and %d from the body under it; want %d, the PUT's, and %d, with the checksum's", w.n, inner.n, len(body), 2*len(body))
	}

	m := metered.NewMeter()
	ms := metered.New(s, m)
	if err := ms.Put(t.Context(), "k", bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	if got := m.Snapshot().Put.Bytes; got != int64(len(body)) {
		t.Fatalf("metered %d bytes put for a body of %d", got, len(body))
	}
}
