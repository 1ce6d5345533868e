package sealed

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

// update regenerates testdata/vectors.json. Sealing draws random nonces, so
// a new file differs in every byte: run it only for a deliberate format
// change (or a new vector), never to make a failing test pass.
var update = flag.Bool("update", false, "regenerate testdata/vectors.json")

const vectorsFile = "testdata/vectors.json"

// vectors is the layout of testdata/vectors.json. Byte strings are hex.
type vectors struct {
	Comment string   `json:"comment"`
	Vectors []vector `json:"vectors"`
}

// vector is one sealed record as it travels, the folder key and folder ID
// it is opened with, and what Open must make of it: "ok" with the opened
// record, or the kind of refusal (see expectOf).
type vector struct {
	Name      string        `json:"name"`
	FolderKey string        `json:"folder_key"`
	Folder    string        `json:"folder"`
	Record    sealedJSON    `json:"record"`
	Expect    string        `json:"expect"`
	Opened    *openedRecord `json:"opened,omitempty"` // when ok
}

// sealedJSON is a protocol.SealedRecord field by field.
type sealedJSON struct {
	Sequence int64    `json:"sequence,omitempty"`
	StoredNs int64    `json:"stored_ns,omitempty"`
	Origin   string   `json:"origin"`
	Counter  uint64   `json:"counter"`
	FileKey  string   `json:"file_key"`
	Sealed   string   `json:"sealed"`
	Deleted  bool     `json:"deleted,omitempty"`
	Chunks   []string `json:"chunks,omitempty"`
}

// openedRecord is an index.Record as Open returns it, with the chunking
// polynomial the payload carries. Short IDs are decimal strings, for JSON
// readers without 64-bit integers; mode is octal (0o644).
type openedRecord struct {
	Name       string        `json:"name"`
	Type       string        `json:"type"`
	Size       int64         `json:"size"`
	Mode       string        `json:"mode"`
	ModTime    int64         `json:"modtime"`
	Deleted    bool          `json:"deleted,omitempty"`
	Version    []counterJSON `json:"version"`
	Blocks     []blockJSON   `json:"blocks,omitempty"`
	Target     string        `json:"target,omitempty"`
	Sequence   int64         `json:"sequence"`
	ModifiedBy uint64        `json:"modified_by,string"`
	Polynomial string        `json:"polynomial"`
}

type counterJSON struct {
	ID    uint64 `json:"id,string"`
	Value uint64 `json:"value"`
}

type blockJSON struct {
	Offset int64  `json:"offset"`
	Size   uint32 `json:"size"`
	Hash   string `json:"hash"`
}

// expectKinds are the results a vector can expect, each with the error it
// stands for.
var expectKinds = []struct {
	name string
	err  error
}{
	{"auth", crypt.ErrAuth},
	{"format", crypt.ErrFormat},
	{"header", ErrHeader},
	{"payload", ErrPayload},
	{"file key", ErrFileKey},
	{"deleted flag", ErrDeleted},
	{"counter", ErrCounter},
	{"chunk list", ErrChunkList},
	{"bad record", ErrRecord},
}

// expectOf maps Open's error to a vector's expect string.
func expectOf(err error) string {
	if err == nil {
		return "ok"
	}
	for _, k := range expectKinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "unexpected: " + err.Error()
}

func TestVectors(t *testing.T) {
	if *update {
		v, err := generateVectors()
		if err != nil {
			t.Fatal(err)
		}
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsFile, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", vectorsFile)
	}
	v := readVectors(t)
	keys := map[string]*crypt.Keys{}
	seen := map[string]bool{}
	for _, c := range v.Vectors {
		seen[c.Expect] = true
		k, ok := keys[c.FolderKey]
		if !ok {
			var err error
			if k, err = crypt.DeriveKeys(crypt.FolderKey(unhex(t, c.FolderKey))); err != nil {
				t.Fatal(err)
			}
			keys[c.FolderKey] = k
		}
		sr := c.Record.proto(t)
		r, err := Open(k, c.Folder, sr)
		if got := expectOf(err); got != c.Expect {
			t.Errorf("%s: %s (%v), want %s", c.Name, got, err, c.Expect)
			continue
		}
		if c.Expect != "ok" {
			if c.Opened != nil {
				t.Errorf("%s: a refused vector holds an opened record", c.Name)
			}
			continue
		}
		if c.Opened == nil {
			t.Errorf("%s: no opened record", c.Name)
			continue
		}
		checkOpened(t, c.Name, k, c.Folder, sr, r, c.Opened)
	}
	for _, e := range append([]string{"ok"}, kindNames()...) {
		if !seen[e] {
			t.Errorf("no vector expects %s", e)
		}
	}
}

// checkOpened checks r, opened from sr, against the vector's record; that
// the payload carries the vector's polynomial; and that Seal, today, makes
// of that record the same clear fields, a payload of it and the
// polynomial, and a record that opens to it.
func checkOpened(t *testing.T, name string, k *crypt.Keys, folder string, sr *protocol.SealedRecord, r index.Record, want *openedRecord) {
	t.Helper()
	if got := toOpened(&r, want.Polynomial); !equalJSON(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("%s: opened\n%s\nwant\n%s", name, g, w)
	}
	h := crypt.RecordHeader{Folder: folder, File: crypt.FileKey(sr.FileKey), Origin: crypt.DeviceID(sr.Origin), Counter: sr.Counter}
	payload, err := k.OpenRecord(h, sr.Sealed)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	p := openPayload(t, payload)
	if got := fmt.Sprintf("%#x", p.Polynomial); got != want.Polynomial {
		t.Errorf("%s: polynomial %s, want %s", name, got, want.Polynomial)
	}
	again, err := Seal(k, folder, crypt.DeviceID(sr.Origin), &r, p.Polynomial)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !sameClearFields(again, sr) {
		t.Errorf("%s: Seal makes other clear fields today", name)
	}
	wantPayload := &protocol.SealedPayload{File: index.ToWire(&r), Polynomial: p.Polynomial}
	payload, err = k.OpenRecord(h, again.Sealed)
	if err != nil {
		t.Fatalf("%s: resealed: %v", name, err)
	}
	gotPayload := openPayload(t, payload)
	if bytes.Count(gotPayload.Padding, []byte{0}) != len(gotPayload.Padding) {
		t.Errorf("%s: padding that is not zeros", name)
	}
	gotPayload.Padding = nil // the size class's, checked in TestRecordSizeClasses
	if !proto.Equal(gotPayload, wantPayload) {
		t.Errorf("%s: Seal makes another payload today", name)
	}
	if back, err := Open(k, folder, again); err != nil || !equalRecords(&back, &r) {
		t.Errorf("%s: resealed, it opens to %+v (%v)", name, back, err)
	}
}

func openPayload(t *testing.T, payload []byte) *protocol.SealedPayload {
	t.Helper()
	var p protocol.SealedPayload
	if err := proto.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func kindNames() []string {
	var out []string
	for _, k := range expectKinds {
		out = append(out, k.name)
	}
	return out
}

func readVectors(t testing.TB) *vectors {
	t.Helper()
	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return &v
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *sealedJSON) proto(t testing.TB) *protocol.SealedRecord {
	t.Helper()
	sr := &protocol.SealedRecord{
		Sequence: s.Sequence, StoredNs: s.StoredNs, Origin: unhex(t, s.Origin), Counter: s.Counter,
		FileKey: unhex(t, s.FileKey), Sealed: unhex(t, s.Sealed), Deleted: s.Deleted,
	}
	for _, c := range s.Chunks {
		sr.Chunks = append(sr.Chunks, unhex(t, c))
	}
	return sr
}

func toSealedJSON(sr *protocol.SealedRecord) sealedJSON {
	s := sealedJSON{
		Sequence: sr.Sequence, StoredNs: sr.StoredNs, Origin: hex.EncodeToString(sr.Origin), Counter: sr.Counter,
		FileKey: hex.EncodeToString(sr.FileKey), Sealed: hex.EncodeToString(sr.Sealed), Deleted: sr.Deleted,
	}
	for _, c := range sr.Chunks {
		s.Chunks = append(s.Chunks, hex.EncodeToString(c))
	}
	return s
}

func toOpened(r *index.Record, pol string) *openedRecord {
	o := &openedRecord{
		Name: r.Name, Type: r.Type.String(), Size: r.Size, Mode: fmt.Sprintf("%O", r.Mode),
		ModTime: r.ModTime, Deleted: r.Deleted, Target: r.Target, Sequence: r.Sequence,
		ModifiedBy: uint64(r.ModifiedBy), Polynomial: pol, Version: []counterJSON{},
	}
	for _, c := range r.Version {
		o.Version = append(o.Version, counterJSON{ID: uint64(c.ID), Value: c.Value})
	}
	for _, b := range r.Blocks {
		o.Blocks = append(o.Blocks, blockJSON{Offset: b.Offset, Size: b.Size, Hash: b.Hash.String()})
	}
	return o
}

func equalJSON(a, b *openedRecord) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// sameClearFields reports whether two sealed records agree on every clear
// field Open checks: all but the sealed bytes (fresh nonce) and the log's
// sequence and storage time.
func sameClearFields(a, b *protocol.SealedRecord) bool {
	return bytes.Equal(a.Origin, b.Origin) && a.Counter == b.Counter && bytes.Equal(a.FileKey, b.FileKey) &&
		a.Deleted == b.Deleted && slices.EqualFunc(a.Chunks, b.Chunks, bytes.Equal)
}

// equalRecords compares every field a record carries across the wire.
func equalRecords(a, b *index.Record) bool {
	return a.Name == b.Name && a.Type == b.Type && a.Size == b.Size && a.Mode == b.Mode &&
		a.ModTime == b.ModTime && a.Deleted == b.Deleted && slices.Equal(a.Version, b.Version) &&
		slices.Equal(a.Blocks, b.Blocks) && a.Target == b.Target && a.Sequence == b.Sequence &&
		a.ModifiedBy == b.ModifiedBy
}

// TestVectorsAreDistinct guards the corpus itself: names are unique, and
// no refused vector is a copy of another vector's record (each shows one
// change).
func TestVectorsAreDistinct(t *testing.T) {
	v := readVectors(t)
	names := map[string]bool{}
	records := map[string]string{}
	for _, c := range v.Vectors {
		if names[c.Name] {
			t.Errorf("two vectors named %q", c.Name)
		}
		names[c.Name] = true
		b, _ := json.Marshal(struct {
			K, F string
			R    sealedJSON
		}{c.FolderKey, c.Folder, c.Record})
		if other, ok := records[string(b)]; ok {
			t.Errorf("%q is the same test as %q", c.Name, other)
		}
		records[string(b)] = c.Name
		if strings.HasPrefix(c.Expect, "unexpected") {
			t.Errorf("%s expects an undocumented error", c.Name)
		}
	}
}
