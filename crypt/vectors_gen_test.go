package crypt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"
	"golang.org/x/crypto/chacha20poly1305"
)

// This file builds testdata/vectors.json for go test -run TestVectors
// -update. Each generated vector states the result it was made for; a
// mismatch aborts the update.

// generateVectors computes every vector from the current code. Only the
// envelopes are random (age salts and file keys); everything else is a
// function of the fixed inputs below.
func generateVectors() (*vectors, error) {
	v := &vectors{Comment: "lockstep crypt format v1 test vectors; hex byte strings; regenerate only for a deliberate format change (go test -run TestVectors -update)"}

	// Device IDs of Ed25519 keys from fixed seeds, and of raw bytes.
	var spkis [][]byte
	for i := range 3 {
		seed := bytes.Repeat([]byte{byte(i)}, ed25519.SeedSize)
		der, err := x509.MarshalPKIXPublicKey(ed25519.NewKeyFromSeed(seed).Public())
		if err != nil {
			return nil, err
		}
		spkis = append(spkis, der)
	}
	spkis = append(spkis, nil, []byte("lockstep"))
	for _, s := range spkis {
		d := DeviceIDFromSPKI(s)
		v.DeviceIDs = append(v.DeviceIDs, deviceIDVector{SPKI: hex.EncodeToString(s), ID: d.String(), Short: d.Short().String()})
	}
	id0 := DeviceIDFromSPKI(spkis[0])
	s := id0.String()
	bare := strings.ReplaceAll(s, "-", "")
	flip := func(pos int) string { // change the character at pos of bare
		b := []byte(bare)
		b[pos] = luhnAlphabet[(strings.IndexByte(luhnAlphabet, b[pos])+1)%32]
		return string(b)
	}
	for _, c := range []struct{ text, expect string }{
		{s, "ok"}, {strings.ToLower(s), "ok"}, {bare, "ok"},
		{strings.ReplaceAll(s, "-", " "), "ok"},
		{"MFZWI3D-BONSGYC-YLTMRWG-C43ENR5-QXGZDMM-FZWI3DP-BONSGYY-LTMRWAD", "ok"}, // Syncthing's example
		{flip(13), "invalid"}, {flip(0), "invalid"}, {flip(30), "invalid"}, {flip(55), "invalid"},
		{bare[:55], "invalid"}, {bare + "A", "invalid"},
		{bare[:13] + bare[14:27] + bare[28:41] + bare[42:55], "invalid"},
		{"0" + bare[1:], "invalid"}, {"", "invalid"},
	} {
		tv := idTextVector{Text: c.text, Expect: c.expect}
		if d, err := ParseDeviceID(c.text); err == nil {
			tv.ID = d.String()
		}
		if got := expectOf(func() error { _, err := ParseDeviceID(c.text); return err }()); got != c.expect {
			return nil, fmt.Errorf("device ID text %q: %s, want %s", c.text, got, c.expect)
		}
		v.DeviceIDTexts = append(v.DeviceIDTexts, tv)
	}

	fk := fixedFolderKey()
	k, err := DeriveKeys(fk)
	if err != nil {
		return nil, err
	}
	v.FolderKey = hex.EncodeToString(fk[:])
	v.Subkeys = subkeysOf(k)
	v.Polynomial = polString(k)
	for _, p := range []string{"", "a", "notes/todo.txt", "caf\u00e9/r\u00e9sum\u00e9.txt", "cafe\u0301/re\u0301sume\u0301.txt"} {
		v.FileKeys = append(v.FileKeys, fileKeyVector{Path: p, FileKey: k.FileKey(p).String()})
	}

	if v.Chunks, err = generateChunkVectors(k); err != nil {
		return nil, err
	}
	if v.Records, err = generateRecordVectors(k, id0); err != nil {
		return nil, err
	}
	if v.Envelopes, err = generateEnvelopeVectors(fk); err != nil {
		return nil, err
	}
	return v, nil
}

func generateChunkVectors(k *Keys) ([]chunkVector, error) {
	var out []chunkVector
	var bad []string
	add := func(name, want string, id ChunkID, body []byte, plain []byte, compress, sealCheck bool) {
		c := chunkVector{Name: name, ID: id.String(), Body: hex.EncodeToString(body), Compress: compress, Seal: sealCheck}
		if plain != nil || sealCheck {
			c.Plaintext = hex.EncodeToString(plain)
		}
		_, err := k.OpenChunk(id, body)
		if c.Expect = expectOf(err); c.Expect != want {
			bad = append(bad, fmt.Sprintf("chunk %s: %s, want %s", name, c.Expect, want))
		}
		out = append(out, c)
	}
	text := compressible(2000)
	small := []byte("a chunk of plaintext")
	plainID, plainBody, _ := k.SealChunk(small, blake3.Sum256(small), false)
	add("small", "ok", plainID, plainBody, small, false, true)
	zID, zBody, _ := k.SealChunk(text, blake3.Sum256(text), true)
	add("compressed", "ok", zID, zBody, text, true, true)
	tID, tBody, _ := k.SealChunk(text, blake3.Sum256(text), false)
	add("text uncompressed", "ok", tID, tBody, text, false, true)
	eID, eBody, _ := k.SealChunk(nil, blake3.Sum256(nil), true)
	add("empty", "ok", eID, eBody, []byte{}, true, true)

	mut := func(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }
	add("format byte 0x02", "format", plainID, mut(plainBody, func(b []byte) []byte { b[0] = 2; return b }), nil, false, false)
	add("format byte 0x00", "format", plainID, mut(plainBody, func(b []byte) []byte { b[0] = 0; return b }), nil, false, false)
	add("empty body", "format", plainID, []byte{}, nil, false, false)
	add("flipped ciphertext", "auth", plainID, mut(plainBody, func(b []byte) []byte { b[1] ^= 1; return b }), nil, false, false)
	add("flipped tag", "auth", plainID, mut(plainBody, func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }), nil, false, false)
	add("truncated", "auth", plainID, plainBody[:len(plainBody)-1], nil, false, false)
	add("extended", "auth", plainID, append(bytes.Clone(plainBody), 0), nil, false, false)
	add("format byte only", "auth", plainID, plainBody[:1], nil, false, false)
	add("other chunk's ID", "auth", zID, plainBody, nil, false, false)
	wrongID, wrongBody, _ := k.SealChunk(small, blake3.Sum256([]byte("not the plaintext")), false)
	add("sealed with a wrong hash", "chunk-id", wrongID, wrongBody, nil, false, false)

	raw := func(name, want string, plainForID []byte, inner []byte) {
		id := k.ChunkID(blake3.Sum256(plainForID))
		add(name, want, id, sealRawChunk(k, id, inner), nil, false, false)
	}
	raw("unknown flag", "format", small, makeInner(0x02, small))
	padded := []byte("abcdefghi") // inner 11 bytes, padded to 12
	nz := makeInner(0, padded)
	nz[len(nz)-1] = 1
	raw("nonzero padding", "format", padded, nz)
	raw("padding too long", "format", small, append(makeInner(0, small), make([]byte, 8)...))
	raw("non-minimal length", "format", []byte("1234567"), append([]byte{0, 0x87, 0}, "1234567"...))
	raw("bad zstd", "format", small, makeInner(flagZstd, small))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, MaxChunkSize+1)
	raw("zstd beyond the limit", "too-large", zeros, makeInner(flagZstd, enc.EncodeAll(zeros, nil)))
	if bad != nil {
		return nil, errors.New(strings.Join(bad, "; "))
	}
	return out, nil
}

func generateRecordVectors(k *Keys, origin DeviceID) ([]recordVector, error) {
	var out []recordVector
	var nonce [chacha20poly1305.NonceSizeX]byte
	for i := range nonce {
		nonce[i] = byte(0xa0 + i)
	}
	base := RecordHeader{Folder: "docs", File: k.FileKey("notes/todo.txt"), Origin: origin, Counter: 7}
	toJSON := func(h RecordHeader) recordHeaderJSON {
		return recordHeaderJSON{Folder: h.Folder, File: h.File.String(), Origin: h.Origin.String(), Counter: h.Counter}
	}
	var bad []string
	add := func(name, want string, h RecordHeader, sealed, payload []byte) {
		r := recordVector{Name: name, Header: toJSON(h), Sealed: hex.EncodeToString(sealed)}
		_, err := k.OpenRecord(h, sealed)
		if r.Expect = expectOf(err); r.Expect != want {
			bad = append(bad, fmt.Sprintf("record %s: %s, want %s", name, r.Expect, want))
		}
		if payload != nil {
			r.Nonce, r.Payload = hex.EncodeToString(nonce[:]), hex.EncodeToString(payload)
		}
		out = append(out, r)
	}
	payload := []byte("a file record: name, size, mode, mtime, version vector, chunk list")
	sealed, err := k.sealRecordWithNonce(base, payload, nonce)
	if err != nil {
		return nil, err
	}
	add("record", "ok", base, sealed, payload)
	empty, err := k.sealRecordWithNonce(base, []byte{}, nonce)
	if err != nil {
		return nil, err
	}
	add("empty payload", "ok", base, empty, []byte{})

	mut := func(f func([]byte)) []byte { b := bytes.Clone(sealed); f(b); return b }
	other := func(f func(*RecordHeader)) RecordHeader { h := base; f(&h); return h }
	add("format byte 0x02", "format", base, mut(func(b []byte) { b[0] = 2 }), nil)
	add("flipped nonce", "auth", base, mut(func(b []byte) { b[1] ^= 1 }), nil)
	add("flipped ciphertext", "auth", base, mut(func(b []byte) { b[30] ^= 1 }), nil)
	add("flipped tag", "auth", base, mut(func(b []byte) { b[len(b)-1] ^= 1 }), nil)
	add("truncated", "auth", base, sealed[:len(sealed)-1], nil)
	add("nonce only", "auth", base, sealed[:25], nil)
	add("other folder", "auth", other(func(h *RecordHeader) { h.Folder = "docs2" }), sealed, nil)
	add("other file", "auth", other(func(h *RecordHeader) { h.File = k.FileKey("notes/done.txt") }), sealed, nil)
	add("other origin", "auth", other(func(h *RecordHeader) { h.Origin = DeviceIDFromSPKI(nil) }), sealed, nil)
	add("other counter", "auth", other(func(h *RecordHeader) { h.Counter = 8 }), sealed, nil)
	add("zstd flag", "format", base, sealRawRecord(k, base, nonce, makeInner(flagZstd, payload)), nil)
	nz := makeInner(0, []byte("abcdefghi"))
	nz[len(nz)-1] = 1
	add("nonzero padding", "format", base, sealRawRecord(k, base, nonce, nz), nil)
	if bad != nil {
		return nil, errors.New(strings.Join(bad, "; "))
	}
	return out, nil
}

func generateEnvelopeVectors(fk FolderKey) ([]envelopeVector, error) {
	rec, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	stranger, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	const pw = "correct horse battery staple"
	env, err := sealEnvelope(fk, []byte(pw), testLogN, []*age.X25519Recipient{rec.Recipient()})
	if err != nil {
		return nil, err
	}
	plain, err := sealEnvelope(fk, []byte(pw), testLogN, nil)
	if err != nil {
		return nil, err
	}
	damaged := bytes.Clone(env)
	damaged[len(damaged)-1] ^= 1 // last byte of the recovery part's payload
	v2 := append([]byte("lockstep-envelope/v2\n"), env[len(envelopeMagic):]...)
	key := hex.EncodeToString(fk[:])
	out := []envelopeVector{
		{Name: "password", Expect: "ok", Envelope: hex.EncodeToString(env), Password: pw, FolderKey: key},
		{Name: "password, no recovery", Expect: "ok", Envelope: hex.EncodeToString(plain), Password: pw, FolderKey: key},
		{Name: "recovery identity", Expect: "ok", Envelope: hex.EncodeToString(env), Identity: rec.String(), FolderKey: key},
		{Name: "wrong password", Expect: "wrong-password", Envelope: hex.EncodeToString(env), Password: pw + "!"},
		{Name: "stranger identity", Expect: "envelope", Envelope: hex.EncodeToString(env), Identity: stranger.String()},
		{Name: "no recovery part", Expect: "envelope", Envelope: hex.EncodeToString(plain), Identity: rec.String()},
		{Name: "damaged recovery part", Expect: "envelope", Envelope: hex.EncodeToString(damaged), Identity: rec.String()},
		{Name: "version 2", Expect: "envelope", Envelope: hex.EncodeToString(v2), Password: pw},
	}
	for i := range out {
		e := &out[i]
		var err error
		if e.Identity != "" {
			id, _ := age.ParseX25519Identity(e.Identity)
			_, err = OpenEnvelopeWithIdentity(unhexOrPanic(e.Envelope), id)
		} else {
			_, err = OpenEnvelope(unhexOrPanic(e.Envelope), []byte(e.Password))
		}
		if got := expectOf(err); got != e.Expect {
			return nil, fmt.Errorf("envelope %s: %s, want %s", e.Name, got, e.Expect)
		}
	}
	return out, nil
}

func unhexOrPanic(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
