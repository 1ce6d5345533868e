package sealed

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	"lockstep/chunk"
	"lockstep/crypt"
	"lockstep/sync/index"
	"lockstep/sync/protocol"
)

// This file builds testdata/vectors.json for go test -run TestVectors
// -update. Each vector is made for one result and checked against it as it
// is made; a mismatch aborts the update.

// generator holds the fixed inputs of the vectors and the vectors made so
// far.
type generator struct {
	key, otherKey   string // hex
	keys, otherKeys *crypt.Keys
	folder          string
	origin          crypt.DeviceID
	pol             uint64
	out             []vector
	bad             []string
}

// deviceID returns the device ID of the Ed25519 key of a seed of n bytes.
func deviceID(n byte) (crypt.DeviceID, error) {
	seed := bytes.Repeat([]byte{n}, ed25519.SeedSize)
	der, err := x509.MarshalPKIXPublicKey(ed25519.NewKeyFromSeed(seed).Public())
	if err != nil {
		return crypt.DeviceID{}, err
	}
	return crypt.DeviceIDFromSPKI(der), nil
}

func newGenerator() (*generator, error) {
	var key, other crypt.FolderKey
	for i := range key {
		key[i], other[i] = byte(i), byte(0x80+i)
	}
	g := &generator{folder: "docs", key: fmt.Sprintf("%x", key), otherKey: fmt.Sprintf("%x", other)}
	var err error
	if g.keys, err = crypt.DeriveKeys(key); err != nil {
		return nil, err
	}
	if g.otherKeys, err = crypt.DeriveKeys(other); err != nil {
		return nil, err
	}
	if g.origin, err = deviceID(0); err != nil {
		return nil, err
	}
	g.pol = uint64(g.keys.Polynomial())
	return g, nil
}

// add appends a vector opened with keys (g.keys unless other) in folder,
// after checking that Open gives want and, for ok, exactly r.
func (g *generator) add(name, want string, other bool, folder string, sr *protocol.SealedRecord, r *index.Record) {
	v := vector{Name: name, FolderKey: g.key, Folder: folder, Record: toSealedJSON(sr), Expect: want}
	keys := g.keys
	if other {
		v.FolderKey, keys = g.otherKey, g.otherKeys
	}
	got, err := Open(keys, folder, sr)
	if e := expectOf(err); e != want {
		g.bad = append(g.bad, fmt.Sprintf("%s: %s, want %s", name, e, want))
	}
	if want == "ok" {
		if r == nil || !equalRecords(&got, r) {
			g.bad = append(g.bad, fmt.Sprintf("%s: opened %+v, want %+v", name, got, r))
		} else {
			v.Opened = toOpened(r, fmt.Sprintf("%#x", g.pol))
		}
	}
	g.out = append(g.out, v)
}

// seal seals r as a trusted device does.
func (g *generator) seal(r *index.Record) *protocol.SealedRecord {
	sr, err := Seal(g.keys, g.folder, g.origin, r, g.pol)
	if err != nil {
		g.bad = append(g.bad, fmt.Sprintf("sealing %q: %v", r.Name, err))
		return &protocol.SealedRecord{}
	}
	return sr
}

// sealPayload seals payload under h with the given clear fields, to make
// records Seal never makes.
func (g *generator) sealPayload(h crypt.RecordHeader, payload []byte, deleted bool, chunks [][]byte) *protocol.SealedRecord {
	body, err := g.keys.SealRecord(h, payload)
	if err != nil {
		g.bad = append(g.bad, fmt.Sprintf("sealing a payload: %v", err))
	}
	return &protocol.SealedRecord{Origin: h.Origin[:], Counter: h.Counter, FileKey: h.File[:], Sealed: body, Deleted: deleted, Chunks: chunks}
}

// sealWire seals fi, changed by change, with clear fields that agree with
// it as far as they can: the file key of its name, its sequence as counter,
// its deletion flag and the chunk IDs of its block hashes.
func (g *generator) sealWire(r *index.Record, change func(fi *protocol.FileInfo)) *protocol.SealedRecord {
	fi := index.ToWire(r)
	change(fi)
	payload, err := proto.Marshal(&protocol.SealedPayload{File: fi, Polynomial: g.pol})
	if err != nil {
		g.bad = append(g.bad, err.Error())
	}
	var chunks [][]byte
	for _, b := range fi.Blocks {
		var h chunk.Hash
		copy(h[:], b.Hash)
		id := g.keys.ChunkID(h)
		chunks = append(chunks, id[:])
	}
	h := crypt.RecordHeader{Folder: g.folder, File: g.keys.FileKey(fi.Name), Origin: g.origin, Counter: uint64(fi.Sequence)}
	return g.sealPayload(h, payload, fi.Deleted, chunks)
}

// clone returns a copy of sr changed by change.
func clone(sr *protocol.SealedRecord, change func(sr *protocol.SealedRecord)) *protocol.SealedRecord {
	c := proto.Clone(sr).(*protocol.SealedRecord)
	change(c)
	return c
}

// content returns n bytes that differ from block to block.
func content(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*i>>7) ^ seed
	}
	return b
}

// fileOf returns a file record of data cut into blocks of the given sizes.
func fileOf(name string, data []byte, sizes ...int) index.Record {
	r := index.Record{Name: name, Type: index.File, Size: int64(len(data)), Mode: 0o644}
	off := 0
	for _, n := range sizes {
		r.Blocks = append(r.Blocks, index.Block{Offset: int64(off), Size: uint32(n), Hash: chunk.HashOf(data[off : off+n])})
		off += n
	}
	return r
}

func generateVectors() (*vectors, error) {
	g, err := newGenerator()
	if err != nil {
		return nil, err
	}
	other, err := deviceID(1)
	if err != nil {
		return nil, err
	}
	version := index.Canonical(index.Vector{{ID: g.origin.Short(), Value: 1700000002}, {ID: other.Short(), Value: 1700000001}})
	stamp := func(r index.Record, seq int64) index.Record {
		r.ModTime, r.Version, r.Sequence, r.ModifiedBy = 1700000000123456789, version, seq, g.origin.Short()
		return r
	}

	// Records that open.
	one := stamp(fileOf("notes/todo.txt", []byte("buy milk\n"), 9), 7)
	baseSR := g.seal(&one)
	g.add("file of one chunk", "ok", false, g.folder, baseSR, &one)
	big := content(500123, 1)
	several := stamp(fileOf("photos/holiday.raw", big, 200000, 300000, 123), 8)
	severalSR := g.seal(&several)
	g.add("file of several chunks", "ok", false, g.folder, severalSR, &several)
	empty := stamp(fileOf("empty", nil), 9)
	emptySR := g.seal(&empty)
	g.add("empty file", "ok", false, g.folder, emptySR, &empty)
	dir := stamp(index.Record{Name: "photos", Type: index.Dir, Mode: 0o755}, 10)
	dirSR := g.seal(&dir)
	g.add("directory", "ok", false, g.folder, dirSR, &dir)
	link := stamp(index.Record{Name: "latest", Type: index.Symlink, Target: "photos/holiday.raw"}, 11)
	g.add("symlink", "ok", false, g.folder, g.seal(&link), &link)
	del := stamp(index.Record{Name: "old/report.pdf", Type: index.File, Deleted: true}, 12)
	delSR := g.seal(&del)
	g.add("deletion", "ok", false, g.folder, delSR, &del)
	deldir := stamp(index.Record{Name: "old", Type: index.Dir, Deleted: true}, 13)
	g.add("deleted directory", "ok", false, g.folder, g.seal(&deldir), &deldir)
	uni := stamp(fileOf("café/résumé 日本語.txt", []byte("naïve\n"), 7), 14)
	g.add("non-ASCII name", "ok", false, g.folder, g.seal(&uni), &uni)
	g.add("renumbered and stamped by a receiver", "ok", false, g.folder,
		clone(baseSR, func(sr *protocol.SealedRecord) { sr.Sequence, sr.StoredNs = 1234, 1700000100000000000 }), &one)
	zeros := make([]byte, chunk.MaxSize)
	largest := stamp(fileOf("disk.img", zeros, chunk.MaxSize), 15)
	g.add("block of the largest chunk size", "ok", false, g.folder, g.seal(&largest), &largest)
	last := stamp(fileOf("last", []byte("x"), 1), math.MaxInt64)
	g.add("largest sequence", "ok", false, g.folder, g.seal(&last), &last)
	long := stamp(fileOf(strings.Repeat("n", 255), []byte("x"), 1), 16)
	g.add("name component of 255 bytes", "ok", false, g.folder, g.seal(&long), &long)
	exec := stamp(fileOf("bin/run", []byte("#!/bin/sh\n"), 10), 17)
	exec.Mode = 0o4755
	sealedExec := g.sealWire(&exec, func(fi *protocol.FileInfo) { fi.Permissions |= 0o100000 })
	exec.Mode = 0o755 // what a peer may set: index.PeerModeMask
	g.add("file type and setuid bits in the mode are dropped", "ok", false, g.folder, sealedExec, &exec)

	// The sealed bytes changed, or opened under another header or key.
	mut := func(f func(sr *protocol.SealedRecord)) *protocol.SealedRecord { return clone(baseSR, f) }
	n := len(baseSR.Sealed)
	g.add("flipped bit in the nonce", "auth", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Sealed[1] ^= 1 }), nil)
	g.add("flipped bit in the ciphertext", "auth", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Sealed[n/2] ^= 1 }), nil)
	g.add("flipped bit in the tag", "auth", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Sealed[n-1] ^= 0x80 }), nil)
	g.add("truncated by one byte", "auth", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Sealed = sr.Sealed[:n-1] }), nil)
	g.add("truncated to the nonce", "auth", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Sealed = sr.Sealed[:25] }), nil)
	g.add("extended by one byte", "auth", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Sealed = append(sr.Sealed, 0) }), nil)
	g.add("format byte 0x02", "format", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Sealed[0] = 2 }), nil)
	g.add("no sealed bytes", "format", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Sealed = nil }), nil)
	g.add("other folder", "auth", false, "docs2", baseSR, nil)
	g.add("other folder key", "auth", true, g.folder, baseSR, nil)
	g.add("counter changed", "auth", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Counter++ }), nil)
	g.add("origin changed", "auth", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Origin = other[:] }), nil)
	otherName := g.keys.FileKey("notes/done.txt")
	g.add("file key changed", "auth", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.FileKey = otherName[:] }), nil)

	// Clear fields of the wrong size.
	g.add("file key of 31 bytes", "header", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.FileKey = sr.FileKey[:31] }), nil)
	g.add("file key of 33 bytes", "header", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.FileKey = append(sr.FileKey, 0) }), nil)
	g.add("no file key", "header", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.FileKey = nil }), nil)
	g.add("origin of 31 bytes", "header", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Origin = sr.Origin[:31] }), nil)
	g.add("origin of 33 bytes", "header", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Origin = append(sr.Origin, 0) }), nil)
	g.add("missing origin", "header", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Origin = nil }), nil)

	// Clear fields that disagree with the record inside.
	g.add("deletion flag set on a file", "deleted flag", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Deleted = true }), nil)
	g.add("deletion flag cleared on a deletion", "deleted flag", false, g.folder, clone(delSR, func(sr *protocol.SealedRecord) { sr.Deleted = false }), nil)
	swapped := clone(severalSR, func(sr *protocol.SealedRecord) { sr.Chunks[0], sr.Chunks[1] = sr.Chunks[1], sr.Chunks[0] })
	g.add("chunks swapped", "chunk list", false, g.folder, swapped, nil)
	g.add("last chunk dropped", "chunk list", false, g.folder, clone(severalSR, func(sr *protocol.SealedRecord) { sr.Chunks = sr.Chunks[:2] }), nil)
	stranger := g.keys.ChunkID(chunk.HashOf([]byte("another file's chunk")))
	g.add("chunk added", "chunk list", false, g.folder, clone(severalSR, func(sr *protocol.SealedRecord) { sr.Chunks = append(sr.Chunks, stranger[:]) }), nil)
	g.add("chunk replaced", "chunk list", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Chunks[0] = stranger[:] }), nil)
	g.add("chunk ID of 31 bytes", "chunk list", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Chunks[0] = sr.Chunks[0][:31] }), nil)
	g.add("plaintext hash as chunk ID", "chunk list", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Chunks[0] = one.Blocks[0].Hash[:] }), nil)
	g.add("every chunk dropped", "chunk list", false, g.folder, mut(func(sr *protocol.SealedRecord) { sr.Chunks = nil }), nil)
	g.add("chunk listed for an empty file", "chunk list", false, g.folder, clone(emptySR, func(sr *protocol.SealedRecord) { sr.Chunks = [][]byte{stranger[:]} }), nil)
	g.add("chunk listed for a directory", "chunk list", false, g.folder, clone(dirSR, func(sr *protocol.SealedRecord) { sr.Chunks = [][]byte{stranger[:]} }), nil)
	g.add("chunk listed for a deletion", "chunk list", false, g.folder, clone(delSR, func(sr *protocol.SealedRecord) { sr.Chunks = [][]byte{stranger[:]} }), nil)

	// Sealed by a key holder, but under the wrong header.
	payload, err := proto.Marshal(&protocol.SealedPayload{File: index.ToWire(&one), Polynomial: g.pol})
	if err != nil {
		return nil, err
	}
	h := crypt.RecordHeader{Folder: g.folder, File: g.keys.FileKey(one.Name), Origin: g.origin, Counter: uint64(one.Sequence)}
	sealUnder := func(change func(h *crypt.RecordHeader), payload []byte) *protocol.SealedRecord {
		h := h
		change(&h)
		return g.sealPayload(h, payload, false, baseSR.Chunks)
	}
	same := func(*crypt.RecordHeader) {}
	g.add("filed under another name", "file key", false, g.folder, sealUnder(func(h *crypt.RecordHeader) { h.File = otherName }, payload), nil)
	g.add("counter above its sequence", "counter", false, g.folder, sealUnder(func(h *crypt.RecordHeader) { h.Counter++ }, payload), nil)
	g.add("counter below its sequence", "counter", false, g.folder, sealUnder(func(h *crypt.RecordHeader) { h.Counter-- }, payload), nil)
	g.add("payload is not a SealedPayload", "payload", false, g.folder, sealUnder(same, []byte{0xff, 0xff}), nil)
	g.add("payload cut inside its file record", "payload", false, g.folder, sealUnder(same, payload[:len(payload)/2]), nil)
	// Protobuf refuses a string that is not UTF-8, and will not marshal one:
	// the name "\xff\xfe" replaces a placeholder of the same length.
	bad := one
	bad.Name = "ÿ"
	badUTF8, err := proto.Marshal(&protocol.SealedPayload{File: index.ToWire(&bad), Polynomial: g.pol})
	if err != nil {
		return nil, err
	}
	badUTF8 = bytes.Replace(badUTF8, []byte(bad.Name), []byte("\xff\xfe"), 1)
	g.add("name not UTF-8", "payload", false, g.folder,
		sealUnder(func(h *crypt.RecordHeader) { h.File = g.keys.FileKey("\xff\xfe") }, badUTF8), nil)

	// A record inside that index.FromWire refuses, with clear fields that
	// agree with it.
	noFile, err := proto.Marshal(&protocol.SealedPayload{Polynomial: g.pol})
	if err != nil {
		return nil, err
	}
	g.add("no file record in the payload", "bad record", false, g.folder,
		g.sealPayload(crypt.RecordHeader{Folder: g.folder, File: g.keys.FileKey(""), Origin: g.origin}, noFile, false, nil), nil)
	for _, c := range []struct {
		name   string
		r      index.Record
		change func(fi *protocol.FileInfo)
	}{
		{"name ../x", one, func(fi *protocol.FileInfo) { fi.Name = "../x" }},
		{"name a/../../x", one, func(fi *protocol.FileInfo) { fi.Name = "a/../../x" }},
		{"absolute name", one, func(fi *protocol.FileInfo) { fi.Name = "/etc/passwd" }},
		{"name with NUL", one, func(fi *protocol.FileInfo) { fi.Name = "a\x00b" }},
		{"name with backslash", one, func(fi *protocol.FileInfo) { fi.Name = `..\x` }},
		{"name inside .lockstep", one, func(fi *protocol.FileInfo) { fi.Name = ".lockstep/versions/x" }},
		{"name inside .LOCKSTEP", one, func(fi *protocol.FileInfo) { fi.Name = "a/.LOCKSTEP/x" }},
		{"temporary file name", one, func(fi *protocol.FileInfo) { fi.Name = ".lockstep-tmp-1" }},
		{"empty name", one, func(fi *protocol.FileInfo) { fi.Name = "" }},
		{"name . (the folder)", dir, func(fi *protocol.FileInfo) { fi.Name = "." }},
		{"empty name component", one, func(fi *protocol.FileInfo) { fi.Name = "a//b" }},
		{"name not in NFC", one, func(fi *protocol.FileInfo) { fi.Name = "cafe\u0301" }},
		{"name component of 256 bytes", one, func(fi *protocol.FileInfo) { fi.Name = strings.Repeat("n", 256) }},
		{"blocks leave a gap", several, func(fi *protocol.FileInfo) { fi.Blocks[1].Offset++ }},
		{"blocks overlap", several, func(fi *protocol.FileInfo) { fi.Blocks[1].Offset-- }},
		{"blocks cover less than the size", several, func(fi *protocol.FileInfo) { fi.Size++ }},
		{"blocks cover more than the size", several, func(fi *protocol.FileInfo) { fi.Size-- }},
		{"block of the largest chunk size plus one", largest, func(fi *protocol.FileInfo) {
			fi.Blocks[0].Size++
			fi.Size++
		}},
		{"empty block", several, func(fi *protocol.FileInfo) {
			fi.Blocks = append(fi.Blocks, &protocol.BlockInfo{Offset: fi.Size, Hash: fi.Blocks[0].Hash})
		}},
		{"block hash of 31 bytes", one, func(fi *protocol.FileInfo) { fi.Blocks[0].Hash = fi.Blocks[0].Hash[:31] }},
		{"no blocks for a file with content", one, func(fi *protocol.FileInfo) { fi.Blocks = nil }},
		{"unknown type", one, func(fi *protocol.FileInfo) { fi.Type = 3 }},
		{"empty version", one, func(fi *protocol.FileInfo) { fi.Version = nil }},
		{"version of zero counters", one, func(fi *protocol.FileInfo) { fi.Version.Counters = []*protocol.Counter{{Id: 5}} }},
		{"negative size", empty, func(fi *protocol.FileInfo) { fi.Size = -1 }},
		{"negative sequence", one, func(fi *protocol.FileInfo) { fi.Sequence = -1 }},
		{"blocks on a directory", one, func(fi *protocol.FileInfo) { fi.Type = protocol.FileInfoType_FILE_INFO_TYPE_DIRECTORY }},
		{"blocks on a deletion", one, func(fi *protocol.FileInfo) { fi.Deleted = true }},
		{"symlink without a target", link, func(fi *protocol.FileInfo) { fi.SymlinkTarget = "" }},
		{"symlink target over 4096 bytes", link, func(fi *protocol.FileInfo) { fi.SymlinkTarget = strings.Repeat("t", 4097) }},
	} {
		g.add(c.name, "bad record", false, g.folder, g.sealWire(&c.r, c.change), nil)
	}

	if g.bad != nil {
		return nil, errors.New(strings.Join(g.bad, "; "))
	}
	return &vectors{
		Comment: "lockstep sealed-record format v1 test vectors: a protocol.SealedRecord field by field (hex byte strings), " +
			"the folder key and folder ID it is opened with, and what sealed.Open must make of it; " +
			"regenerate only for a deliberate format change (go test ./sync/sealed -run TestVectors -update)",
		Vectors: g.out,
	}, nil
}
