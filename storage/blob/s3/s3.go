// Package s3 is a blob.Store in a bucket of an S3-compatible object store,
// through minio-go.
//
// Invariants:
//   - Blob key k lives at object Config.Prefix + "/" + k (just k when the
//     prefix is empty); List skips objects below the prefix whose names are
//     not valid keys. As S3 limits object names to 1024 bytes, a prefix of n
//     bytes (with its "/") shortens the longest key to 1024-n bytes (see
//     MaxKeyLen); longer keys fail with blob.ErrInvalidKey.
//   - Every request carries the caller's context; the client makes no retries
//     (a wrapper may add them), and credentials come only from Config: its
//     keys, or the sources it names (the environment, an AWS credentials
//     file). No key is ever written to an error or a log.
//   - A misconfiguration (keys, bucket, region, clock, TLS, address) fails
//     New with an error matching one of the sentinels of errors.go.
//   - A blob is written with one PUT when its size is known and at most
//     PartSize, else as a multipart upload that is aborted on failure, so a
//     failed Put never leaves a blob or replaces an old one. Create always
//     uses one PUT with If-None-Match: *, so the server decides atomically.
//     A single PUT carries the CRC32C of its body for the server to check:
//     payloads are sent unsigned, and a server may otherwise store a body
//     cut short.
//   - S3 deletes are idempotent, so Delete asks for the object first to
//     report ErrNotExist; of two concurrent Deletes both may succeed.
package s3

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"lockstep/storage/blob"
	"lockstep/storage/blob/internal/sized"
)

// maxIdleConns is how many idle connections to the server are kept.
const maxIdleConns = 64

// PartSize is the size of one part of a multipart upload, and the largest
// blob Put writes with a single PUT.
const PartSize = 16 << 20

// Config says where the store lives.
type Config struct {
	Endpoint string // host:port, without a scheme
	Bucket   string
	Prefix   string // object name prefix; slashes at either end are ignored
	// AccessKey and SecretKey, when set, are the keys; else New takes
	// them from the first of Keys that has them.
	AccessKey string
	SecretKey string
	Keys      []KeySource
	UseTLS    bool
	// CAFile is a PEM file of certificates trusted besides the system's,
	// for a server with a private certificate authority. Needs UseTLS.
	CAFile     string
	Region     string // empty: ask the server
	Addressing Addressing
	// StorageClassFor, if set, gives the storage class of the object a
	// blob is written to ("" for the server's default, STANDARD).
	StorageClassFor func(key string) string
	// CreateBucket makes New create a missing bucket (in Region) instead
	// of failing with ErrNoBucket.
	CreateBucket bool
}

// Addressing says how requests name the bucket.
type Addressing int

const (
	// AddressAuto lets the client choose: virtual-hosted for AWS and
	// known providers, path style elsewhere.
	AddressAuto Addressing = iota
	// AddressPath puts the bucket in the path: https://host/bucket/key.
	AddressPath
	// AddressVirtual puts it in the host name: https://bucket.host/key.
	AddressVirtual
)

var addressingNames = [...]string{AddressAuto: "auto", AddressPath: "path", AddressVirtual: "virtual"}

func (a Addressing) String() string {
	if a < 0 || int(a) >= len(addressingNames) {
		return fmt.Sprintf("Addressing(%d)", int(a))
	}
	return addressingNames[a]
}

// ParseAddressing parses "auto", "path" or "virtual".
func ParseAddressing(s string) (Addressing, error) {
	for a, name := range addressingNames {
		if s == name {
			return Addressing(a), nil
		}
	}
	return 0, fmt.Errorf("unknown S3 addressing %q: want auto, path or virtual", s)
}

func (a Addressing) lookup() minio.BucketLookupType {
	switch a {
	case AddressPath:
		return minio.BucketLookupPath
	case AddressVirtual:
		return minio.BucketLookupDNS
	}
	return minio.BucketLookupAuto
}

// Store is a blob.Store in an S3 bucket. It also implements blob.Creator.
// Safe for concurrent use.
type Store struct {
	client    *minio.Client
	transport *http.Transport
	bucket    string
	prefix    string
	classFor  func(key string) string
	// checksums: a single PUT carries its CRC32C (every server but
	// Google's, which the client refuses them for).
	checksums bool
}

var (
	_ blob.Store       = (*Store)(nil)
	_ blob.Creator     = (*Store)(nil)
	_ blob.RangeReader = (*Store)(nil)
)

// New connects to the endpoint and lists at most one object of the bucket,
// so that a misconfiguration fails here, not at the first upload: the
// error then matches one of the sentinels of errors.go (ErrNoBucket,
// ErrKeysRefused, ErrUnknownAuthority ...). With Config.CreateBucket a
// missing bucket is created. Close releases idle connections.
func New(ctx context.Context, cfg Config) (*Store, error) {
	creds, keySource, err := keys(cfg)
	if err != nil {
		return nil, fmt.Errorf("opening s3 store: %w", err)
	}
	transport, err := newTransport(cfg)
	if err != nil {
		return nil, fmt.Errorf("opening s3 store: %w", err)
	}
	checksums := takesChecksums(cfg.Endpoint)
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        creds,
		Secure:       cfg.UseTLS,
		Region:       cfg.Region,
		BucketLookup: cfg.Addressing.lookup(),
		Transport:    transport,
		MaxRetries:   1,
		// Lets a PUT carry its own checksum header (see put); the client
		// refuses one without it.
		TrailingHeaders: checksums,
	})
	if err != nil {
		return nil, fmt.Errorf("opening s3 store: %w", err)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	s := &Store{client: client, transport: transport, bucket: cfg.Bucket, prefix: prefix, classFor: cfg.StorageClassFor, checksums: checksums}
	what := "bucket"
	err = s.probe(ctx)
	if cfg.CreateBucket && minio.ToErrorResponse(err).Code == minio.NoSuchBucket {
		what = "creating bucket"
		err = s.createBucket(ctx, cfg.Region)
	}
	if err != nil {
		transport.CloseIdleConnections()
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			return nil, fmt.Errorf("opening s3 store: %s %q: %w (%v)", what, cfg.Bucket, ctxErr, err)
		}
		cerr := classify(err, keySource, cfg.Region)
		var resp minio.ErrorResponse
		if cerr == err && !cfg.UseTLS && !errors.As(err, &resp) && speaksTLS(ctx, cfg.Endpoint) {
			// An HTTPS server may just close a plain connection.
			cerr = fmt.Errorf("%w: %w", ErrNeedsTLS, err)
		}
		return nil, fmt.Errorf("opening s3 store: %s %q: %w", what, cfg.Bucket, cerr)
	}
	return s, nil
}

// takesChecksums reports whether the server at endpoint (host:port) is
// given checksum headers: all but Google Cloud Storage's S3 interface,
// for which minio-go refuses them. There payloads keep the client's
// default: signed over plain HTTP (which GCS does not speak), and over
// HTTPS unsigned, as before.
func takesChecksums(endpoint string) bool {
	return !s3utils.IsGoogleEndpoint(url.URL{Host: endpoint})
}

// newTransport returns the HTTP transport for cfg, trusting cfg.CAFile.
func newTransport(cfg Config) (*http.Transport, error) {
	transport, err := minio.DefaultTransport(cfg.UseTLS)
	if err != nil {
		return nil, err
	}
	// A receiver has up to a request per peer's request in flight (64),
	// and a connection beyond the idle pool is closed once done: with the
	// client's 16, bursts of reads kept making new connections, and over
	// TLS their handshakes were a sixth of a receiver's CPU.
	transport.MaxIdleConnsPerHost = maxIdleConns
	if cfg.CAFile == "" {
		return transport, nil
	}
	if !cfg.UseTLS {
		return nil, fmt.Errorf("%w: %s is for TLS, and the store speaks plain HTTP", ErrBadCAFile, cfg.CAFile)
	}
	pem, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCAFile, err)
	}
	pool := transport.TLSClientConfig.RootCAs // with $SSL_CERT_FILE's
	if pool == nil {
		if pool, err = x509.SystemCertPool(); err != nil {
			pool = x509.NewCertPool()
		}
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrBadCAFile, cfg.CAFile)
	}
	transport.TLSClientConfig.RootCAs = pool
	return transport, nil
}

// probe lists at most one object: a request with an error body, unlike
// HEAD of the bucket, so the server can say what is wrong.
func (s *Store) probe(ctx context.Context) error {
	opts := minio.ListObjectsOptions{Prefix: s.prefix, MaxKeys: 1}
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, opts) {
		return oi.Err
	}
	return ctx.Err()
}

// createBucket creates the bucket in region, or in the server's default
// one if region is empty. A bucket created meanwhile is no error.
func (s *Store) createBucket(ctx context.Context, region string) error {
	err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if minio.ToErrorResponse(err).Code == minio.BucketAlreadyOwnedByYou {
		return nil
	}
	return err
}

// Close closes idle connections. Calls in progress finish; the Store must
// not be used afterwards.
func (s *Store) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// mapError turns minio errors into blob's: NoSuchKey into ErrNotExist, a
// failed precondition into ErrExist, and anything under a done context into
// an error that matches the context's error.
func mapError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w (%v)", ctxErr, err)
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == minio.NoSuchKey:
		return blob.ErrNotExist
	case resp.Code == minio.NoSuchBucket:
		return fmt.Errorf("%w: %v", ErrNoBucket, err)
	case resp.Code == minio.PreconditionFailed || resp.StatusCode == http.StatusPreconditionFailed:
		return blob.ErrExist
	}
	return err
}

// Put implements blob.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.put(ctx, key, r, size, false); err != nil {
		return fmt.Errorf("putting blob %q: %w", key, err)
	}
	return nil
}

// Create implements blob.Creator with a conditional PUT (If-None-Match: *).
// A blob of unknown size is read into memory first, as one PUT needs its
// length.
func (s *Store) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.put(ctx, key, r, size, true); err != nil {
		return fmt.Errorf("creating blob %q: %w", key, err)
	}
	return nil
}

func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64, create bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := blob.ValidKey(key); err != nil {
		return err
	}
	if err := s.checkLen(key); err != nil {
		return err
	}
	if size < 0 {
		// Read up to a part: a blob that fits goes in one PUT, not a
		// multipart upload of one part; Create needs it all.
		limit := int64(PartSize)
		if create {
			limit = -1
		}
		head, err := readHead(sized.NewReader(ctx, r, -1), limit)
		if err != nil {
			return err
		}
		if limit < 0 || int64(len(head)) < limit {
			r, size = bytes.NewReader(head), int64(len(head))
		} else {
			r = io.MultiReader(bytes.NewReader(head), r)
		}
	}
	// Payloads go unsigned over plain HTTP too, as over HTTPS, where the
	// server takes checksums: signing them took a SHA-256 of every byte
	// on both sides, a fifth of a receiver's ingest. The checksum below
	// (or a part's, in a multipart upload) still catches a body damaged or
	// cut short. Only an attacker on the path could then change a body
	// unnoticed by the server, which is no more than the server itself can
	// do to what it stores: every chunk, pack and log record is sealed,
	// and the devices that read them check it.
	opts := minio.PutObjectOptions{PartSize: PartSize, DisableContentSha256: s.checksums}
	if s.classFor != nil {
		opts.StorageClass = s.classFor(key)
	}
	if create {
		opts.SetMatchETagExcept("*")
		opts.DisableMultipart = true
	}
	if s.checksums && (create || size >= 0 && size <= PartSize) {
		// One PUT. Its CRC32C goes in a header the server checks, so that
		// a body cut short (a reader failing, a context canceled, a
		// connection dropped) is refused rather than stored: over HTTPS
		// the client sends the body unsigned, and versitygw stored such a
		// body as it was, which a retried Create then took for its own.
		sum, again, err := checksum(ctx, r, size)
		if err != nil {
			return err
		}
		r = again
		opts.UserMetadata = map[string]string{"x-amz-checksum-crc32c": sum}
	}
	// A multipart upload is safe without: the client aborts it when a
	// part fails.
	sr := sized.NewReader(ctx, r, size)
	if size == 0 {
		// The client reads nothing for an empty body: check r is empty.
		if _, err := sr.Read(make([]byte, 1)); err != io.EOF {
			return err
		}
	}
	_, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, sr, size, opts)
	if err != nil {
		if rerr := sr.Err(); rerr != nil {
			return rerr // the reader's own error, not the client's report of it
		}
		return mapError(ctx, err)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum reads r, which must hold size bytes, and returns their CRC32C
// in base64, as S3's x-amz-checksum-crc32c wants it, and a reader of the
// same bytes: r itself if the body under its layers' wrappers
// (blob.InnermostBody) can seek, read there and sought back, so that the
// layers count and pace only the PUT's pass; else a copy in memory (a
// single PUT's body is at most PartSize, or a Create's).
func checksum(ctx context.Context, r io.Reader, size int64) (string, io.Reader, error) {
	h := crc32.New(castagnoli)
	if rs, ok := blob.InnermostBody(r).(io.ReadSeeker); ok {
		if start, err := rs.Seek(0, io.SeekCurrent); err == nil {
			if _, err := io.Copy(h, sized.NewReader(ctx, rs, size)); err != nil {
				return "", nil, err
			}
			if _, err := rs.Seek(start, io.SeekStart); err != nil {
				return "", nil, err
			}
			return base64.StdEncoding.EncodeToString(h.Sum(nil)), r, nil
		}
	}
	buf, err := io.ReadAll(sized.NewReader(ctx, r, size))
	if err != nil {
		return "", nil, err
	}
	h.Write(buf)
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), bytes.NewReader(buf), nil
}

// readHead reads up to limit bytes from r (all of it if limit < 0).
func readHead(r io.Reader, limit int64) ([]byte, error) {
	if limit >= 0 {
		r = io.LimitReader(r, limit)
	}
	return io.ReadAll(r)
}

// MaxKeyLen returns the length of the longest key the store accepts:
// blob.MaxKeyLen less the prefix, as S3 limits whole object names to 1024
// bytes.
func (s *Store) MaxKeyLen() int {
	return blob.MaxKeyLen - len(s.prefix)
}

// checkLen refuses a valid key that is too long for the prefix.
func (s *Store) checkLen(key string) error {
	if len(key) > s.MaxKeyLen() {
		return fmt.Errorf("%w: %d bytes long, more than the %d left beside the prefix", blob.ErrInvalidKey, len(key), s.MaxKeyLen())
	}
	return nil
}

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, key string, fn func(io.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	if err := blob.ValidKey(key); err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	if err := s.checkLen(key); err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	// One plain GET: minio.Client.GetObject would HEAD first and then GET
	// with If-Match, failing when a Put replaces the blob in between.
	body, oi, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return fmt.Errorf("getting blob %q: %w", key, mapError(ctx, err))
	}
	defer body.Close()
	return fn(sized.NewReader(ctx, body, oi.Size))
}

// GetRange implements blob.RangeReader with one ranged GET. A range that
// starts at or past the blob's end (416 from the server) is an empty read;
// an empty range is a HEAD.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64, fn func(io.Reader) error) error {
	if err := blob.CheckRange(ctx, key, off, n); err != nil {
		return err
	}
	if err := s.checkLen(key); err != nil {
		return fmt.Errorf("getting blob %q: %w", key, err)
	}
	if n == 0 {
		if _, err := s.stat(ctx, key); err != nil {
			return fmt.Errorf("getting blob %q: %w", key, err)
		}
		return fn(sized.NewReader(ctx, strings.NewReader(""), 0))
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+n-1); err != nil {
		return fmt.Errorf("getting blob %q: %w: %w", key, blob.ErrInvalidRange, err)
	}
	body, _, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, s.prefix+key, opts)
	if resp := minio.ToErrorResponse(err); err != nil && (resp.Code == "InvalidRange" || resp.StatusCode == http.StatusRequestedRangeNotSatisfiable) {
		// off is at or past the end, or the blob is missing and the server
		// answered 416 first: ask which.
		if _, err := s.stat(ctx, key); err != nil {
			return fmt.Errorf("getting blob %q: %w", key, err)
		}
		return fn(sized.NewReader(ctx, strings.NewReader(""), 0))
	}
	if err != nil {
		return fmt.Errorf("getting blob %q: %w", key, mapError(ctx, err))
	}
	defer body.Close()
	return fn(sized.NewReader(ctx, io.LimitReader(body, n), -1))
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (blob.Info, error) {
	info, err := s.stat(ctx, key)
	if err != nil {
		return blob.Info{}, fmt.Errorf("stat of blob %q: %w", key, err)
	}
	return info, nil
}

func (s *Store) stat(ctx context.Context, key string) (blob.Info, error) {
	if err := ctx.Err(); err != nil {
		return blob.Info{}, err
	}
	if err := blob.ValidKey(key); err != nil {
		return blob.Info{}, err
	}
	if err := s.checkLen(key); err != nil {
		return blob.Info{}, err
	}
	oi, err := s.client.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return blob.Info{}, mapError(ctx, err)
	}
	return blob.Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if _, err := s.stat(ctx, key); err != nil {
		return fmt.Errorf("deleting blob %q: %w", key, err)
	}
	if err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("deleting blob %q: %w", key, mapError(ctx, err))
	}
	return nil
}

// List implements blob.Store, in the server's order, which S3 defines as
// the lexical order of object names.
func (s *Store) List(ctx context.Context, prefix string, fn func(blob.Info) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("listing blobs %q: %w", prefix, err)
	}
	if err := blob.ValidPrefix(prefix); err != nil {
		return fmt.Errorf("listing blobs: %w", err)
	}
	fetchOwner := false
	opts := minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true, FetchOwner: &fetchOwner}
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, opts) {
		if oi.Err != nil {
			return fmt.Errorf("listing blobs %q: %w", prefix, mapError(ctx, oi.Err))
		}
		key := strings.TrimPrefix(oi.Key, s.prefix)
		if blob.ValidKey(key) != nil {
			continue // not written by a Store
		}
		if err := fn(blob.Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}); err != nil {
			return err
		}
	}
	// The iterator ends silently when ctx is done.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("listing blobs %q: %w", prefix, err)
	}
	return nil
}
