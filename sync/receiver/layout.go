package receiver

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/db"
	"lockstep/sync/protocol"
)

// Limits on objects read back from the store.
const (
	maxMetaSize = 1 << 20
	maxLogSize  = protocol.MaxFrameSize
)

// ErrCorrupt marks store content that does not parse or breaks the layout
// (see the package comment), found by Rebuild.
var ErrCorrupt = errors.New("receiver store content is corrupt")

// folderKey is the store segment of a folder: the hex of its ID's bytes.
func folderKey(id string) string { return hex.EncodeToString([]byte(id)) }

func metaKey(fk string) string             { return "r/" + fk + "/meta.json" }
func chunkKey(fk string, id []byte) string { return "r/" + fk + "/c/" + hex.EncodeToString(id) }
func logKey(fk string, first int64) string { return fmt.Sprintf("r/%s/log/%016x", fk, first) }
func envelopeKey(fk string, gen int64) string {
	return fmt.Sprintf("r/%s/envelope/%016x", fk, gen)
}

// IsDataKey reports whether key is a sealed chunk body (r/<fk>/c/<id>) or
// a pack (r/<fk>/p/<id>): the bulk of a receiver's store, written once and
// read rarely, unlike its logs, envelopes and meta objects. A store may
// keep them in a cheaper storage class.
func IsDataKey(key string) bool {
	parts := strings.Split(key, "/")
	return len(parts) == 4 && parts[0] == "r" && parts[1] != "" && (parts[2] == "c" || parts[2] == "p") && parts[3] != ""
}

// meta is the JSON of r/<fk>/meta.json: what Rebuild needs besides the
// records, chunks and envelope.
type meta struct {
	ID      string       `json:"id"`
	Label   string       `json:"label"`
	Path    string       `json:"path"`
	LogID   uint64       `json:"logID"`
	Devices []metaDevice `json:"devices"`
	// Retention is the folder's policy; absent keeps everything.
	Retention *metaRetention `json:"retention,omitempty"`
	// HighWater holds the marks pruning never lowers; absent before the
	// first prune.
	HighWater *metaHighWater `json:"highWater,omitempty"`
}

// metaRetention is a Policy in the meta object.
type metaRetention struct {
	KeepLast        int `json:"keepLast,omitempty"`
	KeepHourly      int `json:"keepHourly,omitempty"`
	KeepDaily       int `json:"keepDaily,omitempty"`
	KeepWeekly      int `json:"keepWeekly,omitempty"`
	KeepMonthly     int `json:"keepMonthly,omitempty"`
	KeepYearly      int `json:"keepYearly,omitempty"`
	KeepDeletedDays int `json:"keepDeletedDays,omitempty"`
}

// metaHighWater is the highest log sequence and, per origin, the highest
// counter the folder ever held, as of its last prune.
type metaHighWater struct {
	Sequence int64         `json:"sequence"`
	Counters []metaCounter `json:"counters"`
}

// metaCounter is an origin's highest counter.
type metaCounter struct {
	Origin  hexBytes `json:"origin"`
	Counter uint64   `json:"counter"`
}

// hexBytes is a byte string written as hex in JSON.
type hexBytes []byte

func (h hexBytes) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h)), nil }

func (h *hexBytes) UnmarshalText(b []byte) error {
	d, err := hex.DecodeString(string(b))
	*h = d
	return err
}

// metaRetentionOf returns p for the meta object, nil for the zero Policy.
func metaRetentionOf(p Policy) *metaRetention {
	if p == (Policy{}) {
		return nil
	}
	m := metaRetention(p)
	return &m
}

// policy returns the policy m holds.
func (m *meta) policy() Policy {
	if m.Retention == nil {
		return Policy{}
	}
	return Policy(*m.Retention)
}

// metaHighWaterOf returns hw for the meta object, nil when it has no mark.
func metaHighWaterOf(hw db.ReceiverHighWater) *metaHighWater {
	if hw.Sequence == 0 && len(hw.Counters) == 0 {
		return nil
	}
	m := &metaHighWater{Sequence: hw.Sequence, Counters: []metaCounter{}}
	for _, c := range hw.Counters {
		m.Counters = append(m.Counters, metaCounter{Origin: c.Origin, Counter: c.Counter})
	}
	return m
}

// highWater returns the marks m holds.
func (m *meta) highWater() db.ReceiverHighWater {
	var hw db.ReceiverHighWater
	if m.HighWater == nil {
		return hw
	}
	hw.Sequence = m.HighWater.Sequence
	for _, c := range m.HighWater.Counters {
		hw.Counters = append(hw.Counters, db.OriginCounter{Origin: c.Origin, Counter: c.Counter})
	}
	return hw
}

// metaDevice is one device the folder is shared with.
type metaDevice struct {
	ID        crypt.DeviceID `json:"id"`
	Name      string         `json:"name"`
	Addresses []string       `json:"addresses"`
	Untrusted bool           `json:"untrusted,omitempty"`
}

// encode returns the stored form of m.
func (m *meta) encode() []byte {
	b, err := json.MarshalIndent(m, "", "\t")
	if err != nil {
		panic(err) // only strings, numbers and device IDs: cannot fail
	}
	return append(b, '\n')
}

// ErrNoStoreKey means a folder is stored under a store key this node
// lacks (the home's store.key).
var ErrNoStoreKey = errors.New("the folder is stored under a store key this node lacks (copy store.key from the home that wrote it)")

// opaque reports whether fk is a segment a store key made.
func opaque(fk string) bool { return strings.HasPrefix(fk, crypt.OpaqueSegmentPrefix) }

// logFolder is the folder name the log objects of the folder stored
// under fk carry: its ID, or nothing in an opaque segment, whose log
// objects must not name it.
func logFolder(fk, folderID string) string {
	if opaque(fk) {
		return ""
	}
	return folderID
}

// metaForStore is the meta object plain as the store keeps it under fk:
// sealed with key in an opaque segment.
func metaForStore(fk string, plain []byte, key *crypt.StoreKey) ([]byte, error) {
	if !opaque(fk) {
		return plain, nil
	}
	if key == nil {
		return nil, fmt.Errorf("writing the meta of %s: %w", fk, ErrNoStoreKey)
	}
	return key.SealMeta(fk, plain)
}

// parseMeta decodes the meta object of the folder stored under fk, as
// the store holds it (a sealed one opens with key) or plain, as the
// receiver keeps it in memory.
func parseMeta(fk string, data []byte, key *crypt.StoreKey) (*meta, error) {
	if crypt.IsSealedMeta(data) {
		if key == nil {
			return nil, fmt.Errorf("meta of %s: %w", fk, ErrNoStoreKey)
		}
		plain, err := key.OpenMeta(fk, data)
		if err != nil {
			return nil, fmt.Errorf("%w: meta of %s: %w", ErrCorrupt, fk, err)
		}
		data = plain
	}
	var m meta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: meta of %s: %w", ErrCorrupt, fk, err)
	}
	switch {
	case m.ID == "":
		return nil, fmt.Errorf("%w: meta of %s: empty folder ID", ErrCorrupt, fk)
	case folderKey(m.ID) != fk && (key == nil || key.Segment(m.ID) != fk):
		return nil, fmt.Errorf("%w: meta of %s names folder %q", ErrCorrupt, fk, m.ID)
	case m.LogID == 0:
		return nil, fmt.Errorf("%w: meta of %s: log ID 0", ErrCorrupt, fk)
	}
	seen := make(map[crypt.DeviceID]bool)
	for _, d := range m.Devices {
		if seen[d.ID] || d.ID.IsZero() {
			return nil, fmt.Errorf("%w: meta of %s: device %v twice or zero", ErrCorrupt, fk, d.ID)
		}
		seen[d.ID] = true
	}
	if m.Retention != nil {
		if err := m.policy().check(); err != nil {
			return nil, fmt.Errorf("%w: meta of %s: %w", ErrCorrupt, fk, err)
		}
	}
	if hw := m.HighWater; hw != nil {
		if hw.Sequence < 0 {
			return nil, fmt.Errorf("%w: meta of %s: high-water sequence %d", ErrCorrupt, fk, hw.Sequence)
		}
		origins := make(map[string]bool)
		for _, c := range hw.Counters {
			if len(c.Origin) != db.SealedIDSize || c.Counter > math.MaxInt64 || origins[string(c.Origin)] {
				return nil, fmt.Errorf("%w: meta of %s: bad or repeated high-water origin %x", ErrCorrupt, fk, []byte(c.Origin))
			}
			origins[string(c.Origin)] = true
		}
	}
	return &m, nil
}

// toWire converts stored records to SealedRecords.
func toWire(recs []db.SealedRecord) []*protocol.SealedRecord {
	out := make([]*protocol.SealedRecord, len(recs))
	for i, r := range recs {
		w := &protocol.SealedRecord{
			Sequence: r.Seq,
			Origin:   r.Origin,
			Counter:  r.Counter,
			FileKey:  r.FileKey,
			Sealed:   r.Sealed,
			StoredNs: r.StoredAt.UnixNano(),
			Deleted:  r.Deleted,
		}
		for off := 0; off < len(r.Chunks); off += db.SealedIDSize {
			w.Chunks = append(w.Chunks, r.Chunks[off:off+db.SealedIDSize])
		}
		out[i] = w
	}
	return out
}

// fromWire converts one SealedRecord to its stored form, with seq as log
// sequence; it does not check the sizes of the IDs.
func fromWire(w *protocol.SealedRecord, seq int64, stored time.Time) db.SealedRecord {
	return db.SealedRecord{
		Seq:      seq,
		Origin:   w.GetOrigin(),
		Counter:  w.GetCounter(),
		FileKey:  w.GetFileKey(),
		Sealed:   w.GetSealed(),
		Chunks:   bytes.Join(w.GetChunks(), nil),
		StoredAt: stored,
		Deleted:  w.GetDeleted(),
	}
}

// checkRecord returns why w cannot be stored by a receiver, or nil.
func checkRecord(w *protocol.SealedRecord) error {
	switch {
	case len(w.GetOrigin()) != db.SealedIDSize:
		return fmt.Errorf("origin of %d bytes", len(w.GetOrigin()))
	case len(w.GetFileKey()) != db.SealedIDSize:
		return fmt.Errorf("file key of %d bytes", len(w.GetFileKey()))
	case w.GetCounter() > math.MaxInt64:
		return fmt.Errorf("counter %d out of range", w.GetCounter())
	case w.GetStoredNs() < 0:
		return fmt.Errorf("stored time %d before 1970", w.GetStoredNs())
	}
	for i, c := range w.GetChunks() {
		if len(c) != db.SealedIDSize {
			return fmt.Errorf("chunk %d: ID of %d bytes", i, len(c))
		}
	}
	return nil
}

// parseLog decodes the log object stored under key (r/<fk>/log/<first>)
// of folder folderID. Its records must carry strictly increasing log
// sequences, the first at least the key's (a prune may have taken records
// out of the object), and a stored time.
func parseLog(folderID, key string, data []byte) ([]*protocol.SealedRecord, error) {
	first, err := logFirst(key)
	if err != nil {
		return nil, err
	}
	var idx protocol.SealedIndex
	if err := proto.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, key, err)
	}
	if idx.GetFolder() != folderID {
		return nil, fmt.Errorf("%w: %s: records of folder %q", ErrCorrupt, key, idx.GetFolder())
	}
	if len(idx.GetRecords()) == 0 {
		return nil, fmt.Errorf("%w: %s: no records", ErrCorrupt, key)
	}
	prev := first - 1 // the lowest sequence allowed is prev+1
	for i, r := range idx.GetRecords() {
		if err := checkRecord(r); err != nil {
			return nil, fmt.Errorf("%w: %s: record %d: %w", ErrCorrupt, key, i, err)
		}
		if r.GetSequence() <= prev {
			return nil, fmt.Errorf("%w: %s: record %d has sequence %d", ErrCorrupt, key, i, r.GetSequence())
		}
		prev = r.GetSequence()
		if r.GetStoredNs() == 0 {
			return nil, fmt.Errorf("%w: %s: record %d has no stored time", ErrCorrupt, key, i)
		}
	}
	return idx.GetRecords(), nil
}

// logFirst returns the first sequence named by a log object's key.
func logFirst(key string) (int64, error) {
	name := key[strings.LastIndexByte(key, '/')+1:]
	if len(name) != 16 {
		return 0, fmt.Errorf("%w: log object %s: name is not 16 hex digits", ErrCorrupt, key)
	}
	first, err := strconv.ParseUint(name, 16, 64)
	if err != nil || first == 0 || first > math.MaxInt64 {
		return 0, fmt.Errorf("%w: log object %s: bad first sequence", ErrCorrupt, key)
	}
	return int64(first), nil
}

// getLimited reads the blob key, refusing one longer than limit bytes.
func getLimited(ctx context.Context, store blob.Store, key string, limit int64) ([]byte, error) {
	var data []byte
	err := store.Get(ctx, key, func(r io.Reader) error {
		var err error
		data, err = io.ReadAll(io.LimitReader(r, limit+1))
		return err
	})
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorrupt, key, limit)
	}
	return data, nil
}
