package crypt

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"filippo.io/age"
	"github.com/zeebo/blake3"
	"golang.org/x/crypto/chacha20poly1305"
)

// update regenerates testdata/vectors.json. The vectors pin the format: run
// it only for a deliberate format change (or a new vector), never to make a
// failing test pass.
var update = flag.Bool("update", false, "regenerate testdata/vectors.json")

const vectorsFile = "testdata/vectors.json"

// vectors is the layout of testdata/vectors.json. Byte strings are hex.
// expect is one of: ok, invalid (device ID), format, auth, chunk-id,
// too-large, wrong-password, envelope.
type vectors struct {
	Comment       string            `json:"comment"`
	DeviceIDs     []deviceIDVector  `json:"device_ids"`
	DeviceIDTexts []idTextVector    `json:"device_id_texts"`
	FolderKey     string            `json:"folder_key"`
	Subkeys       map[string]string `json:"subkeys"`
	Polynomial    string            `json:"polynomial"`
	FileKeys      []fileKeyVector   `json:"file_keys"`
	Chunks        []chunkVector     `json:"chunks"`
	Records       []recordVector    `json:"records"`
	Envelopes     []envelopeVector  `json:"envelopes"`
}

type deviceIDVector struct {
	SPKI  string `json:"spki"`
	ID    string `json:"id"`
	Short string `json:"short"`
}

type idTextVector struct {
	Text   string `json:"text"`
	Expect string `json:"expect"`
	ID     string `json:"id,omitempty"` // canonical form when ok
}

type fileKeyVector struct {
	Path    string `json:"path"`
	FileKey string `json:"file_key"`
}

type chunkVector struct {
	Name      string `json:"name"`
	Plaintext string `json:"plaintext,omitempty"` // for ok vectors
	Compress  bool   `json:"compress,omitempty"`
	Seal      bool   `json:"seal,omitempty"` // SealChunk(plaintext) must give body exactly
	ID        string `json:"id"`
	Body      string `json:"body"`
	Expect    string `json:"expect"`
}

type recordHeaderJSON struct {
	Folder  string `json:"folder"`
	File    string `json:"file"`
	Origin  string `json:"origin"`
	Counter uint64 `json:"counter"`
}

type recordVector struct {
	Name    string           `json:"name"`
	Header  recordHeaderJSON `json:"header"`
	Nonce   string           `json:"nonce,omitempty"`   // with payload: seal with it must give sealed
	Payload string           `json:"payload,omitempty"` // for ok vectors
	Sealed  string           `json:"sealed"`
	Expect  string           `json:"expect"`
}

type envelopeVector struct {
	Name      string `json:"name"`
	Envelope  string `json:"envelope"`
	Password  string `json:"password,omitempty"`
	Identity  string `json:"identity,omitempty"` // age X25519 secret key
	FolderKey string `json:"folder_key,omitempty"`
	Expect    string `json:"expect"`
}

// expectOf maps an error to a vector's expect string.
func expectOf(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{ErrInvalidDeviceID, "invalid"}, {ErrFormat, "format"}, {ErrAuth, "auth"},
		{ErrChunkID, "chunk-id"}, {ErrTooLarge, "too-large"},
		{ErrWrongPassword, "wrong-password"}, {ErrEnvelope, "envelope"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	if err == nil {
		return "ok"
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
	checkDeviceIDVectors(t, &v)
	k := checkKeyVectors(t, &v)
	checkChunkVectors(t, k, v.Chunks)
	checkRecordVectors(t, k, v.Records)
	checkEnvelopeVectors(t, v.Envelopes)
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkDeviceIDVectors(t *testing.T, v *vectors) {
	if len(v.DeviceIDs) == 0 || len(v.DeviceIDTexts) == 0 {
		t.Fatal("no device ID vectors")
	}
	for _, c := range v.DeviceIDs {
		d := DeviceIDFromSPKI(unhex(t, c.SPKI))
		if d.String() != c.ID || d.Short().String() != c.Short {
			t.Errorf("SPKI %s…: ID %s short %s, want %s %s", c.SPKI[:16], d, d.Short(), c.ID, c.Short)
		}
	}
	for _, c := range v.DeviceIDTexts {
		d, err := ParseDeviceID(c.Text)
		if got := expectOf(err); got != c.Expect {
			t.Errorf("ParseDeviceID(%q): %s (%v), want %s", c.Text, got, err, c.Expect)
		} else if err == nil && d.String() != c.ID {
			t.Errorf("ParseDeviceID(%q) = %s, want %s", c.Text, d, c.ID)
		}
	}
}

func checkKeyVectors(t *testing.T, v *vectors) *Keys {
	fk := FolderKey(unhex(t, v.FolderKey))
	k, err := DeriveKeys(fk)
	if err != nil {
		t.Fatal(err)
	}
	for label, got := range subkeysOf(k) {
		if v.Subkeys[label] != got {
			t.Errorf("subkey %s = %s, want %s", label, got, v.Subkeys[label])
		}
	}
	if len(v.Subkeys) != len(subkeysOf(k)) {
		t.Errorf("vectors hold %d subkeys, want %d", len(v.Subkeys), len(subkeysOf(k)))
	}
	if got := polString(k); got != v.Polynomial {
		t.Errorf("polynomial = %s, want %s", got, v.Polynomial)
	}
	for _, c := range v.FileKeys {
		if got := k.FileKey(c.Path).String(); got != c.FileKey {
			t.Errorf("FileKey(%q) = %s, want %s", c.Path, got, c.FileKey)
		}
	}
	return k
}

func checkChunkVectors(t *testing.T, k *Keys, cs []chunkVector) {
	seen := map[string]bool{}
	for _, c := range cs {
		seen[c.Expect] = true
		id, err := ParseChunkID(c.ID)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		body := unhex(t, c.Body)
		plain, err := k.OpenChunk(id, body)
		if got := expectOf(err); got != c.Expect {
			t.Errorf("chunk %s: %s (%v), want %s", c.Name, got, err, c.Expect)
			continue
		}
		if c.Expect == "ok" && !bytes.Equal(plain, unhex(t, c.Plaintext)) {
			t.Errorf("chunk %s: plaintext differs", c.Name)
		}
		if c.Seal {
			p := unhex(t, c.Plaintext)
			gotID, gotBody, err := k.SealChunk(p, blake3.Sum256(p), c.Compress)
			if err != nil || gotID != id || !bytes.Equal(gotBody, body) {
				t.Errorf("chunk %s: SealChunk gave ID %v body %x (%v), want %v %s", c.Name, gotID, gotBody, err, id, c.Body)
			}
		}
	}
	for _, e := range []string{"ok", "format", "auth", "chunk-id", "too-large"} {
		if !seen[e] {
			t.Errorf("no chunk vector expects %s", e)
		}
	}
}

func headerFromJSON(t *testing.T, h recordHeaderJSON) RecordHeader {
	fk, err := ParseFileKey(h.File)
	if err != nil {
		t.Fatal(err)
	}
	origin, err := ParseDeviceID(h.Origin)
	if err != nil {
		t.Fatal(err)
	}
	return RecordHeader{Folder: h.Folder, File: fk, Origin: origin, Counter: h.Counter}
}

func checkRecordVectors(t *testing.T, k *Keys, rs []recordVector) {
	seen := map[string]bool{}
	for _, r := range rs {
		seen[r.Expect] = true
		h := headerFromJSON(t, r.Header)
		sealed := unhex(t, r.Sealed)
		payload, err := k.OpenRecord(h, sealed)
		if got := expectOf(err); got != r.Expect {
			t.Errorf("record %s: %s (%v), want %s", r.Name, got, err, r.Expect)
			continue
		}
		if r.Expect == "ok" {
			if !bytes.Equal(payload, unhex(t, r.Payload)) {
				t.Errorf("record %s: payload differs", r.Name)
			}
			nonce := [chacha20poly1305.NonceSizeX]byte(unhex(t, r.Nonce))
			again, err := k.sealRecordWithNonce(h, unhex(t, r.Payload), nonce)
			if err != nil || !bytes.Equal(again, sealed) {
				t.Errorf("record %s: sealing with the vector's nonce gave %x (%v)", r.Name, again, err)
			}
		}
	}
	for _, e := range []string{"ok", "format", "auth"} {
		if !seen[e] {
			t.Errorf("no record vector expects %s", e)
		}
	}
}

func checkEnvelopeVectors(t *testing.T, es []envelopeVector) {
	if len(es) == 0 {
		t.Fatal("no envelope vectors")
	}
	for _, e := range es {
		env := unhex(t, e.Envelope)
		var key FolderKey
		var err error
		if e.Identity != "" {
			id, perr := age.ParseX25519Identity(e.Identity)
			if perr != nil {
				t.Fatal(perr)
			}
			key, err = OpenEnvelopeWithIdentity(env, id)
		} else {
			key, err = OpenEnvelope(env, []byte(e.Password))
		}
		if got := expectOf(err); got != e.Expect {
			t.Errorf("envelope %s: %s (%v), want %s", e.Name, got, err, e.Expect)
		} else if err == nil && hex.EncodeToString(key[:]) != e.FolderKey {
			t.Errorf("envelope %s: key %x, want %s", e.Name, key, e.FolderKey)
		}
	}
}

func subkeysOf(k *Keys) map[string]string {
	return map[string]string{
		labelChunkID:    hex.EncodeToString(k.chunkID[:]),
		labelChunk:      hex.EncodeToString(k.current().chunk[:]),
		labelChunkNonce: hex.EncodeToString(k.current().chunkNonce[:]),
		labelName:       hex.EncodeToString(k.name[:]),
		labelRecord:     hex.EncodeToString(k.current().record[:]),
	}
}

func polString(k *Keys) string { return fmt.Sprintf("%#x", uint64(k.Polynomial())) }

// TestVectorsFileIsClean guards against committing a vectors file with a
// stray path or unexpected results.
func TestVectorsFileIsClean(t *testing.T) {
	data, err := os.ReadFile(filepath.Clean(vectorsFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("unexpected:")) {
		t.Fatal("vectors hold an unexpected error")
	}
}
