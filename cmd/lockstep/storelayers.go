package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/spf13/pflag"

	"lockstep/storage/blob"
	"lockstep/storage/blob/limit"
	"lockstep/storage/blob/logged"
	"lockstep/storage/blob/metered"
	"lockstep/storage/blob/retry"
	"lockstep/sync/check"
)

// storeLayerOptions say how the node wraps the blob store it opens:
// retries, limits, debug logging and metering (storage/blob/retry, limit,
// logged, metered).
type storeLayerOptions struct {
	Concurrency   int      // calls in flight at most; 0: no bound
	UploadLimit   byteRate // bytes per second; 0: no bound
	DownloadLimit byteRate
	Retries       int // retries of a call failing transiently (S3 only)
	// Logger receives retries and, when it logs debug records, every
	// call. Default: slog.Default(), which serve sets up.
	Logger *slog.Logger
}

// defaultStoreRetries is the default of --store-retries.
const defaultStoreRetries = 4

// addStoreLayerFlags adds the flags of o to fs.
func addStoreLayerFlags(fs *pflag.FlagSet, o *storeLayerOptions) {
	fs.IntVar(&o.Concurrency, "store-concurrency", 0, "at most N blob store calls at once (0: no limit)")
	fs.Var(&o.UploadLimit, "store-upload-limit", "write blobs at most SIZE per second, e.g. 10MiB (0: no limit)")
	fs.Var(&o.DownloadLimit, "store-download-limit", "read blobs at most SIZE per second, e.g. 10MiB (0: no limit)")
	fs.IntVar(&o.Retries, "store-retries", defaultStoreRetries, "retry an S3 call failing transiently (timeouts, 5xx, SlowDown, resets) up to N times")
}

// layerStore wraps st, the store openStore opened, in the layers o asks
// for. From the outside in:
//
//   - logged, only when the logger logs debug records: one record per
//     call a caller made, its duration including retries;
//   - retry, only when transient is not nil (S3: the client makes no
//     retries of its own; a local disk's failures do not pass, and
//     retrying them would only hide a failing disk), with exponential
//     backoff and full jitter;
//   - metered, under retry so that it counts every attempt, as a
//     provider bills them (see storeUsage);
//   - limit, innermost, so that a call sleeping before a retry holds no
//     slot.
//
// Each layer keeps the optional abilities (Creator, Batcher, RangeReader)
// of st.
func layerStore(st blob.Store, o storeLayerOptions, transient func(error) bool) blob.Store {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := st
	if o.Concurrency > 0 || o.UploadLimit > 0 || o.DownloadLimit > 0 {
		s = limit.New(s, limit.Options{Concurrency: o.Concurrency, Upload: int64(o.UploadLimit), Download: int64(o.DownloadLimit)})
	}
	s = metered.New(s, metered.NewMeter())
	if transient != nil && o.Retries > 0 {
		s = retry.New(s, retry.Options{Attempts: o.Retries + 1, Transient: transient, Logger: log})
	}
	if log.Enabled(context.Background(), slog.LevelDebug) {
		s = logged.New(s, log)
	}
	return s
}

// storeUsage returns the requests and bytes of each kind the store made
// since it was opened, for a status page to show, if s was made by
// layerStore.
func storeUsage(s blob.Store) (metered.Snapshot, bool) {
	m := metered.Of(s)
	if m == nil {
		return metered.Snapshot{}, false
	}
	return m.Snapshot(), true
}

// byteRate is a number of bytes per second given as a flag: "1048576", "512KiB",
// "10MiB", "1.5GB" (kB, MB, GB are powers of 1000; KiB, MiB, GiB of 1024).
type byteRate int64

func (b *byteRate) Set(s string) error {
	n, err := check.ParseSize(s)
	if err != nil {
		return fmt.Errorf("%q is not a size such as 10MiB", s)
	}
	*b = byteRate(n)
	return nil
}

func (b *byteRate) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteRate) Type() string { return "size" }
