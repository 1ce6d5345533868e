package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"lockstep/crypt"
	"lockstep/sync/fsys"
	"lockstep/sync/index"
	"lockstep/sync/sealed"
)

// Errors returned, wrapped, by Recover. Match them with errors.Is.
var (
	// ErrWrongPassword: the password does not open the folder key envelope
	// the receiver holds. It wraps crypt.ErrWrongPassword. Nothing was
	// written.
	ErrWrongPassword = fmt.Errorf("the password does not open the folder key: %w", crypt.ErrWrongPassword)
	// ErrNotShared: the receiver refused this device, or does not offer it
	// the folder. The receiver must have this device added (accepted) and
	// the folder shared with it. Nothing was written.
	ErrNotShared = errors.New("receiver does not share the folder with this device")
	// ErrNoKey: the receiver holds no folder key envelope for the folder,
	// so nothing it holds can be opened. Nothing was written.
	ErrNoKey = errors.New("receiver holds no key envelope for the folder")
	// ErrDamaged: some records or files failed verification (tampered,
	// damaged or missing on the receiver). Everything else was written; the
	// Result says what was not.
	ErrDamaged = errors.New("some data failed verification")
	// ErrIncomplete: the newest checkpoint in the receiver's log (the one
	// sealed last, by any device) covers records the log does not hold,
	// or holds only in older versions: the receiver dropped or withheld
	// them. Nothing was written, unless Options.AcceptIncomplete; the
	// Result's Proofs say what is missing.
	ErrIncomplete = errors.New("the receiver's log is missing records its newest checkpoint covers")
	// ErrTargetNotEmpty: the target directory exists and is not empty, or
	// is not a directory. Nothing was contacted or written.
	ErrTargetNotEmpty = errors.New("target exists and is not an empty directory")
)

// Options say what to recover from where. Identity, Address, Receiver,
// Folder, Password and To are required.
type Options struct {
	// Identity is this device's identity, presented to the receiver.
	Identity *crypt.Identity
	// Address is the receiver's host:port.
	Address string
	// Receiver is the receiver's device ID, pinned in the TLS handshake.
	Receiver crypt.DeviceID
	// Folder is the folder ID.
	Folder string
	// Password opens the folder key envelope.
	Password []byte
	// To is the target directory. It is created (with missing parents)
	// once the password has opened the key; if it exists it must be an
	// empty directory.
	To string
	// Progress, if set, is called with the running totals at most about
	// every 200 ms while files are written, and once at the end. Calls
	// never overlap; they must return quickly.
	Progress func(Progress)
	// Log receives diagnostics; nil discards them.
	Log *slog.Logger
	// Version is the implementation version sent in the Hello message;
	// optional.
	Version string
	// AcceptIncomplete writes what the receiver holds even when its
	// newest checkpoint proves records missing; Recover then returns
	// ErrIncomplete after writing.
	AcceptIncomplete bool

	// logStall and envelopeWait, when set, replace logStallTimeout and
	// envelopeTimeout (tests).
	logStall, envelopeWait time.Duration
}

// Progress is the state of the writing phase. Files counts regular files
// and symlinks processed (written or found damaged); Bytes counts file
// content written.
type Progress struct {
	Files, FilesTotal int
	Bytes, BytesTotal int64
}

// Result says what a recovery wrote.
type Result struct {
	// Files, Dirs and Symlinks count the entries written (the target
	// directory itself not included); Bytes the file content written.
	Files, Dirs, Symlinks int
	Bytes                 int64
	// Damaged lists, sorted, the names not restored: a chunk of theirs
	// failed verification or was missing, or they could not be placed
	// because a parent name is a file or symlink.
	Damaged []string
	// DamagedRecords counts sealed records that failed verification. Their
	// names are unknown, so they are not in Damaged.
	DamagedRecords int
	// Proofs say, per device that sealed a checkpoint, whether the log
	// held everything its newest checkpoint covers; none for a log of
	// devices that seal no checkpoints (older versions).
	Proofs []Proof
	// AsOf is the time of the newest checkpoint: the state restored is at
	// least that device's state then (zero: no checkpoint).
	AsOf time.Time
}

// Recover fetches folder opts.Folder's current state from the receiver and
// writes it under opts.To. It speaks to the receiver as a device that
// holds nothing, so the receiver sends its whole record log; of each name
// the winning version (index.Record.Wins, across all origins) is restored
// unless it is a deletion. Before anything is written, the newest
// checkpoint in the log is checked against the records (proof.go).
//
// Errors: ErrWrongPassword (wraps crypt.ErrWrongPassword), ErrNotShared
// (the receiver does not offer the folder to this device, or refused the
// device), ErrNoKey (the receiver holds no envelope), ErrTargetNotEmpty,
// ErrIncomplete (records missing: nothing written, or with
// AcceptIncomplete everything held written), ErrDamaged (some files could
// not be verified: the Result lists them, everything else is written), or
// a connection, protocol or file system failure. On every error but
// ErrDamaged and ErrIncomplete the Result counts what was written before
// the failure.
func Recover(ctx context.Context, opts Options) (Result, error) {
	if err := opts.check(); err != nil {
		return Result{}, err
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := checkTarget(opts.To); err != nil {
		return Result{}, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := connect(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	reason := "recovered"
	defer func() { s.close(reason) }()

	res, err := recoverOver(ctx, s, opts, log)
	if err != nil && !errors.Is(err, ErrDamaged) {
		reason = "recovery failed"
	}
	return res, err
}

// recoverOver runs a recovery over an established session.
func recoverOver(ctx context.Context, s *session, opts Options, log *slog.Logger) (Result, error) {
	last, err := s.announce(ctx)
	if err != nil {
		return Result{}, err
	}
	// The key opens while the log arrives. On the way out its request is
	// given up before it is waited for.
	keysc := make(chan opened, 1)
	kctx, kcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer kcancel()
	wg.Go(func() {
		keys, err := s.folderKeys(kctx, opts.Password)
		keysc <- opened{keys, err}
	})
	pf := newPrefetcher(ctx, s.conn, opts.Folder, true)
	defer pf.close()
	c, err := s.collect(ctx, last, keysc, func(k *crypt.Keys) *collector {
		log.Debug("opened folder key", "folder", opts.Folder, "log", last)
		return newCollector(k, opts.Folder, log)
	}, pf.offer)
	pf.stop()
	if n, size := pf.count(); n > 0 {
		log.Debug("chunks fetched while the key opened", "chunks", n, "bytes", size)
	}
	if err != nil {
		return Result{}, err
	}
	p := c.plan()
	log.Debug("record log collected", "folder", opts.Folder, "names", len(c.best), "damaged records", c.bad)
	proofs := c.prover.Proofs()
	var asOf time.Time
	var incomplete error
	if n := sealed.NewestProof(proofs); n != nil {
		asOf = n.AsOf
		if !n.Complete {
			why := "the receiver dropped or withheld records, or a file changed while it was uploaded"
			if c.bad > 0 {
				why = fmt.Sprintf("%d records failed verification", c.bad)
			}
			incomplete = fmt.Errorf("%w: device %s's checkpoint of %s covers %d files; the log gives %d of them at their newest version or fewer (%s)",
				ErrIncomplete, n.Origin.Short(), n.AsOf.UTC().Format(time.RFC3339), n.Files, n.Found, why)
			if !opts.AcceptIncomplete {
				return Result{Proofs: proofs, AsOf: asOf}, incomplete
			}
		}
	}

	if err := createTarget(opts.To); err != nil {
		return Result{}, err
	}
	root, err := fsys.Open(opts.To)
	if err != nil {
		return Result{}, fmt.Errorf("opening target: %w", err)
	}
	defer root.Close()

	w := newWriter(root, &sealedSource{conn: s.conn, keys: c.keys, folder: opts.Folder, early: pf}, log, opts.Progress)
	res, err := w.write(ctx, p)
	res.DamagedRecords = c.bad
	res.Proofs, res.AsOf = proofs, asOf
	if err != nil {
		return res, err
	}
	// Adding the recovered directory as the folder goes on from here:
	// chunked as before, nothing a receiver holds is sent again.
	if c.pol != 0 {
		if err := index.WriteJoinHint(opts.To, index.JoinHint{Folder: opts.Folder, Polynomial: c.pol}); err != nil {
			return res, fmt.Errorf("recording how the folder was chunked: %w", err)
		}
	}
	if len(res.Damaged) > 0 || res.DamagedRecords > 0 {
		return res, errors.Join(incomplete, fmt.Errorf("%w: %s", ErrDamaged, damageSummary(res)))
	}
	return res, incomplete
}

// check reports a missing required option.
func (o *Options) check() error {
	switch {
	case o.Identity == nil:
		return errors.New("recover: no identity given")
	case o.Address == "":
		return errors.New("recover: no receiver address given")
	case o.Receiver.IsZero():
		return errors.New("recover: no receiver device ID given")
	case o.Folder == "":
		return errors.New("recover: no folder ID given")
	case len(o.Password) == 0:
		return fmt.Errorf("recover: %w", crypt.ErrEmptyPassword)
	case o.To == "":
		return errors.New("recover: no target directory given")
	}
	return nil
}

// checkTarget accepts a target that is missing or an empty directory.
func checkTarget(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking target: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrTargetNotEmpty, dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checking target: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("%w: %s holds %s", ErrTargetNotEmpty, dir, names[0])
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("checking target: %w", err)
	}
	return nil
}

// createTarget creates the target directory and checks it is empty.
func createTarget(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating target: %w", err)
	}
	return checkTarget(dir)
}

// damageSummary is the one-line account of what failed verification.
func damageSummary(res Result) string {
	var parts []string
	if res.DamagedRecords > 0 {
		parts = append(parts, fmt.Sprintf("%d records failed verification", res.DamagedRecords))
	}
	if n := len(res.Damaged); n > 0 {
		const show = 5
		names := strings.Join(res.Damaged[:min(n, show)], ", ")
		if n > show {
			names += fmt.Sprintf(" and %d more", n-show)
		}
		parts = append(parts, fmt.Sprintf("%d files not restored (%s)", n, names))
	}
	return strings.Join(parts, "; ")
}
