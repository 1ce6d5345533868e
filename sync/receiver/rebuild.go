package receiver

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
	"lockstep/sync/receiver/pack"
)

// ErrNotEmpty means Rebuild was given a database that already has
// folders.
var ErrNotEmpty = errors.New("database already has folders")

// errFound stops a List early.
var errFound = errors.New("found")

// StoreHasFolders reports whether the store holds any receiver folder meta
// (so `serve` can notice an empty database with a non-empty store).
func StoreHasFolders(ctx context.Context, store blob.Store) (bool, error) {
	checked := make(map[string]bool)
	found := false
	err := store.List(ctx, "r/", func(info blob.Info) error {
		fk, _, ok := strings.Cut(strings.TrimPrefix(info.Key, "r/"), "/")
		if !ok || checked[fk] {
			return nil
		}
		checked[fk] = true
		// The meta object sorts after the folder's chunks: ask for it.
		_, err := store.Stat(ctx, metaKey(fk))
		if errors.Is(err, blob.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return false, fmt.Errorf("looking for receiver folders: %w", err)
	}
	return found, nil
}

// storedFolder is what the store holds of one folder.
type storedFolder struct {
	fk        string
	hasMeta   bool
	chunks    map[string]db.SealedChunk // where each chunk is, by ID bytes
	packs     []blob.Info               // pack objects, in key order
	logs      []string                  // log object keys, in order
	envelope  string                    // key of the highest generation
	envelopeN int64
}

// Rebuild fills an empty database from the store alone: every encrypted
// folder whose meta object is in the store, with its devices, shares, log
// ID, envelope, records (same log sequences and stored times) and chunk
// list. Records referencing a chunk missing from the store are left out
// (and logged); chunks no record references are not listed. It returns the
// folder IDs rebuilt. Records a prune dropped are gone from the store's
// log, and its high-water marks and the retention policy come back from
// the meta object. It refuses with ErrNotEmpty if the database already
// has folders, and fails with ErrCorrupt on store content that breaks the
// layout.
func Rebuild(ctx context.Context, database *db.DB, store blob.Store, log *slog.Logger) ([]string, error) {
	return RebuildWithKey(ctx, database, store, nil, log)
}

// RebuildWithKey is Rebuild that opens the folders stored under key (a
// crypt.StoreKey's segments, serve --opaque-store); without it (nil)
// such folders fail with ErrNoStoreKey.
func RebuildWithKey(ctx context.Context, database *db.DB, store blob.Store, key *crypt.StoreKey, log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	existing, err := database.Folders(ctx)
	if err != nil {
		return nil, err
	}
	if len(existing) > 0 {
		return nil, fmt.Errorf("rebuilding from the store: %w", ErrNotEmpty)
	}
	found, err := scanStore(ctx, store)
	if err != nil {
		return nil, err
	}
	var rebuilt []string
	live, err := liveSegments(ctx, store, key, found)
	if err != nil {
		return nil, fmt.Errorf("rebuilding from the store: %w", err)
	}
	for _, sf := range found {
		if !sf.hasMeta {
			log.Warn("receiver data without a meta object in the store, skipped", "key", "r/"+sf.fk)
			continue
		}
		if _, ok := live[sf.fk]; !ok {
			log.Warn("the store holds an older copy of a folder under another name; left as it is", "key", "r/"+sf.fk)
			continue
		}
		id, err := rebuildFolder(ctx, database, store, key, log, sf)
		if err != nil {
			return rebuilt, fmt.Errorf("rebuilding from the store: %w", err)
		}
		log.Info("rebuilt encrypted folder from the store", "folder", id, "logs", len(sf.logs), "chunks", len(sf.chunks))
		rebuilt = append(rebuilt, id)
	}
	return rebuilt, nil
}

// liveSegments returns, by segment, the folder ID of each segment to
// rebuild: of segments whose meta names one folder (a folder removed from
// the receiver leaves its objects, and added again under --opaque-store
// it is stored under another name), the one whose meta was written last.
func liveSegments(ctx context.Context, store blob.Store, key *crypt.StoreKey, found []*storedFolder) (map[string]string, error) {
	type pick struct {
		fk   string
		when time.Time
	}
	best := map[string]pick{}
	for _, sf := range found {
		if !sf.hasMeta {
			continue
		}
		info, err := store.Stat(ctx, metaKey(sf.fk))
		if err != nil {
			return nil, err
		}
		data, err := getLimited(ctx, store, metaKey(sf.fk), maxMetaSize)
		if err != nil {
			return nil, err
		}
		m, err := parseMeta(sf.fk, data, key)
		if err != nil {
			return nil, err
		}
		if b, ok := best[m.ID]; !ok || info.ModTime.After(b.when) {
			best[m.ID] = pick{sf.fk, info.ModTime}
		}
	}
	live := map[string]string{}
	for id, p := range best {
		live[p.fk] = id
	}
	return live, nil
}

// scanStore lists the receiver part of the store, folder by folder.
func scanStore(ctx context.Context, store blob.Store) ([]*storedFolder, error) {
	var out []*storedFolder
	byFK := make(map[string]*storedFolder)
	err := store.List(ctx, "r/", func(info blob.Info) error {
		parts := strings.Split(info.Key, "/")
		if len(parts) < 3 {
			return nil
		}
		sf := byFK[parts[1]]
		if sf == nil {
			sf = &storedFolder{fk: parts[1], chunks: make(map[string]db.SealedChunk)}
			byFK[parts[1]] = sf
			out = append(out, sf)
		}
		switch {
		case len(parts) == 3 && parts[2] == "meta.json":
			sf.hasMeta = true
		case len(parts) == 4 && parts[2] == "c":
			id, err := hex.DecodeString(parts[3])
			if err != nil || len(id) != db.SealedIDSize {
				return fmt.Errorf("%w: chunk key %s", ErrCorrupt, info.Key)
			}
			sf.chunks[string(id)] = db.SealedChunk{ID: id, Size: info.Size, StoredAt: info.ModTime}
		case len(parts) == 4 && parts[2] == "p":
			if _, ok := packIDOf(info.Key); !ok {
				return fmt.Errorf("%w: pack key %s", ErrCorrupt, info.Key)
			}
			sf.packs = append(sf.packs, info)
		case len(parts) == 4 && parts[2] == "log":
			sf.logs = append(sf.logs, info.Key)
		case len(parts) == 4 && parts[2] == "envelope":
			gen, err := strconv.ParseInt(parts[3], 16, 64)
			if err != nil || len(parts[3]) != 16 || gen <= 0 {
				return fmt.Errorf("%w: envelope key %s", ErrCorrupt, info.Key)
			}
			if gen > sf.envelopeN {
				sf.envelope, sf.envelopeN = info.Key, gen
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the store: %w", err)
	}
	return out, nil
}

// rebuildFolder restores one folder and returns its ID.
func rebuildFolder(ctx context.Context, database *db.DB, store blob.Store, key *crypt.StoreKey, log *slog.Logger, sf *storedFolder) (string, error) {
	data, err := getLimited(ctx, store, metaKey(sf.fk), maxMetaSize)
	if err != nil {
		return "", err
	}
	m, err := parseMeta(sf.fk, data, key)
	if err != nil {
		return "", err
	}
	for _, d := range m.Devices {
		if _, err := database.Device(ctx, d.ID.String()); err == nil {
			continue // known already: keep what the user set
		}
		if err := database.PutDevice(ctx, db.Device{ID: d.ID.String(), Name: d.Name, Addresses: d.Addresses, Untrusted: d.Untrusted}); err != nil {
			return "", err
		}
	}
	if err := database.PutFolder(ctx, db.Folder{ID: m.ID, Label: m.Label, Path: m.Path, Type: db.Encrypted}); err != nil {
		return "", err
	}
	if _, err := database.InitReceiverSegment(ctx, m.ID, sf.fk); err != nil {
		return "", err
	}
	for _, d := range m.Devices {
		if err := database.ShareFolder(ctx, m.ID, d.ID.String()); err != nil {
			return "", err
		}
	}
	if _, err := database.InitReceiverLog(ctx, m.ID, m.LogID); err != nil {
		return "", err
	}
	if err := database.RaiseReceiverHighWater(ctx, m.ID, m.highWater()); err != nil {
		return "", err
	}
	if err := database.SetReceiverRetention(ctx, m.ID, db.ReceiverRetention(m.policy())); err != nil {
		return "", err
	}
	if sf.envelope != "" {
		env, err := getLimited(ctx, store, sf.envelope, protocol.MaxEnvelopeSize)
		if err != nil {
			return "", err
		}
		if len(env) == 0 {
			return "", fmt.Errorf("%w: %s is empty", ErrCorrupt, sf.envelope)
		}
		if err := database.PutReceiverEnvelope(ctx, m.ID, env, sf.envelopeN); err != nil {
			return "", err
		}
	}
	if err := indexPacks(ctx, store, log, sf); err != nil {
		return "", err
	}
	listed := make(map[string]bool) // chunks already in the database
	var last int64
	for _, objKey := range sf.logs {
		data, err := getLimited(ctx, store, objKey, maxLogSize)
		if err != nil {
			return "", err
		}
		wire, err := parseLog(logFolder(sf.fk, m.ID), objKey, data)
		if err != nil {
			return "", err
		}
		if first, _ := logFirst(objKey); first <= last {
			return "", fmt.Errorf("%w: %s overlaps the log before it (up to %d)", ErrCorrupt, objKey, last)
		}
		last = wire[len(wire)-1].GetSequence()
		recs, chunks := restoreRecords(log, m.ID, wire, sf.chunks, listed)
		if err := database.AppendSealed(ctx, m.ID, recs, chunks); err != nil {
			return "", fmt.Errorf("%s: %w", objKey, err)
		}
	}
	return m.ID, nil
}

// indexPacks adds the chunks of sf's packs to sf.chunks, where no blob of
// their own (or an earlier pack) holds them already.
func indexPacks(ctx context.Context, store blob.Store, log *slog.Logger, sf *storedFolder) error {
	for _, info := range sf.packs {
		id, _ := packIDOf(info.Key)
		entries, err := pack.ReadIndex(ctx, store, info.Key, info.Size)
		if errors.Is(err, pack.ErrInvalid) {
			log.Warn("pack that does not parse, skipped", "key", info.Key, "err", err)
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if _, ok := sf.chunks[string(e.ID)]; !ok {
				sf.chunks[string(e.ID)] = db.SealedChunk{ID: e.ID, Size: e.Length, StoredAt: info.ModTime, Pack: id, Offset: e.Offset}
			}
		}
	}
	return nil
}

// restoreRecords converts the records of one log object, leaving out those
// that reference chunks the store lacks, and returns them with the chunks
// they reference that are not listed yet (which it marks listed).
func restoreRecords(log *slog.Logger, folderID string, wire []*protocol.SealedRecord,
	stored map[string]db.SealedChunk, listed map[string]bool) ([]db.SealedRecord, []db.SealedChunk) {
	var (
		recs   []db.SealedRecord
		chunks []db.SealedChunk
	)
next:
	for _, w := range wire {
		for _, c := range w.GetChunks() {
			if loc, ok := stored[string(c)]; !ok || loc.Size <= 0 {
				log.Warn("record references a chunk missing from the store, left out",
					"folder", folderID, "sequence", w.GetSequence(), "chunk", fmt.Sprintf("%x", c))
				continue next
			}
		}
		for _, c := range w.GetChunks() {
			if !listed[string(c)] {
				listed[string(c)] = true
				chunks = append(chunks, stored[string(c)])
			}
		}
		recs = append(recs, fromWire(w, w.GetSequence(), time.Unix(0, w.GetStoredNs())))
	}
	return recs, chunks
}
