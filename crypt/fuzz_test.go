package crypt

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/zeebo/blake3"
)

// loadVectors reads testdata/vectors.json for fuzz seeds.
func loadVectors(f *testing.F) *vectors {
	f.Helper()
	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		f.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		f.Fatal(err)
	}
	return &v
}

func mustHex(f *testing.F, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzParseDeviceID: no panics; whatever parses is printed back as the
// normalised input (so parsing is exact), and any 32 bytes round-trip.
func FuzzParseDeviceID(f *testing.F) {
	for _, c := range loadVectors(f).DeviceIDTexts {
		f.Add(c.Text, []byte(c.Text))
	}
	f.Add("", make([]byte, 32))
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		d, err := ParseDeviceID(s)
		if err == nil {
			norm := strings.NewReplacer("-", "", " ", "", "\t", "", "\n", "", "\r", "").Replace(strings.ToUpper(s))
			if got := strings.ReplaceAll(d.String(), "-", ""); got != norm {
				t.Fatalf("ParseDeviceID(%q) = %s, which is not the input", s, d)
			}
		} else if !errors.Is(err, ErrInvalidDeviceID) {
			t.Fatalf("error %v does not wrap ErrInvalidDeviceID", err)
		}
		var id DeviceID
		copy(id[:], raw)
		back, err := ParseDeviceID(id.String())
		if err != nil || back != id {
			t.Fatalf("round trip of %x: %v, %v", id, back, err)
		}
		if id.Short().String() != id.String()[:7] {
			t.Fatalf("short ID of %x", id)
		}
	})
}

// FuzzOpenChunk: no panics, only documented errors, and anything that opens
// is exactly what SealChunk makes of its plaintext.
func FuzzOpenChunk(f *testing.F) {
	for _, c := range loadVectors(f).Chunks {
		f.Add(mustHex(f, c.ID), mustHex(f, c.Body))
	}
	k := testKeys(f)
	f.Fuzz(func(t *testing.T, idBytes, body []byte) {
		var id ChunkID
		copy(id[:], idBytes)
		plain, err := k.OpenChunk(id, body)
		if err != nil {
			if expectOf(err) == "ok" || strings.HasPrefix(expectOf(err), "unexpected") {
				t.Fatalf("undocumented error %v", err)
			}
			return
		}
		if k.ChunkID(blake3.Sum256(plain)) != id {
			t.Fatal("opened a chunk whose plaintext does not match its ID")
		}
		var resealed [][]byte
		for _, compress := range []bool{false, true} {
			_, b, err := k.SealChunk(plain, blake3.Sum256(plain), compress)
			if err != nil {
				t.Fatal(err)
			}
			resealed = append(resealed, b)
		}
		if !bytes.Equal(resealed[0], body) && !bytes.Equal(resealed[1], body) {
			t.Fatal("an opened chunk is not what SealChunk makes")
		}
	})
}

// FuzzOpenRecord: no panics, only documented errors, and a record that
// opens is one SealRecord made (same length, re-sealed with its own nonce).
func FuzzOpenRecord(f *testing.F) {
	v := loadVectors(f)
	for _, r := range v.Records {
		f.Add(r.Header.Folder, r.Header.Counter, mustHex(f, r.Sealed))
	}
	k := testKeys(f)
	var file FileKey
	var origin DeviceID
	if len(v.Records) > 0 {
		file, _ = ParseFileKey(v.Records[0].Header.File)
		origin, _ = ParseDeviceID(v.Records[0].Header.Origin)
	}
	f.Fuzz(func(t *testing.T, folder string, counter uint64, sealed []byte) {
		h := RecordHeader{Folder: folder, File: file, Origin: origin, Counter: counter}
		payload, err := k.OpenRecord(h, sealed)
		if err != nil {
			if expectOf(err) == "ok" || strings.HasPrefix(expectOf(err), "unexpected") {
				t.Fatalf("undocumented error %v", err)
			}
			return
		}
		again, err := k.sealRecordWithNonce(h, payload, [24]byte(sealed[1:25]))
		if err != nil || !bytes.Equal(again, sealed) {
			t.Fatalf("an opened record is not what SealRecord makes: %v", err)
		}
	})
}

// FuzzOpenEnvelope: no panics, only documented errors; a container that
// parses marshals back to the same bytes; an envelope that opens yields
// the vectors' folder key.
func FuzzOpenEnvelope(f *testing.F) {
	v := loadVectors(f)
	const pw = "correct horse battery staple"
	for _, e := range v.Envelopes {
		f.Add(mustHex(f, e.Envelope))
	}
	f.Add([]byte(envelopeMagic))
	want := FolderKey(mustHex(f, v.FolderKey))
	id, err := age.GenerateX25519Identity()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, env []byte) {
		if e, err := parseEnvelope(env); err == nil {
			out, err := e.marshal()
			if err != nil || !bytes.Equal(out, env) {
				t.Fatalf("marshal(parse(env)) differs: %v", err)
			}
		} else if !errors.Is(err, ErrEnvelope) {
			t.Fatalf("parse error %v does not wrap ErrEnvelope", err)
		}
		key, err := openEnvelope(env, []byte(pw), testMaxLogN)
		switch {
		case err == nil && key != want:
			t.Fatalf("opened to %x, want %x", key, want)
		case err != nil && !errors.Is(err, ErrEnvelope) && !errors.Is(err, ErrWrongPassword):
			t.Fatalf("undocumented error %v", err)
		}
		if _, err := OpenEnvelopeWithIdentity(env, id); err == nil {
			t.Fatal("a fresh identity opened an envelope")
		} else if !errors.Is(err, ErrEnvelope) {
			t.Fatalf("undocumented error %v", err)
		}
	})
}
