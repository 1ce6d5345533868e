package index

import (
	"crypto/sha256"
	"encoding/hex"

	"lockstep/storage/db"
)

// ContentID identifies content by its chunks: the SHA-256 of their hashes
// in order, in hex. Files with the same content, chunked with the same
// polynomial, have the same ID wherever their records are (a receiver's
// versions too: backup.ReceiverVersion.ContentID).
func ContentID(bs []Block) string {
	h := sha256.New()
	for _, b := range bs {
		h.Write(b.Hash[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ContentIDOf is the ContentID of a stored record's chunks.
func ContentIDOf(f db.FileRecord) (string, error) {
	bs, err := decodeBlocks(f.Chunks)
	if err != nil {
		return "", err
	}
	return ContentID(bs), nil
}
