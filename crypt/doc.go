// Package crypt holds lockstep's cryptography: device identities and the TLS
// configurations that authenticate them, folder keys and their password
// envelopes, and the sealing of chunks and records for untrusted receivers.
//
// It is a pure library: it starts no goroutines, keeps no state beyond the
// values it returns, and does I/O only on identity files in a directory the
// caller names. Every error wraps one of the Err sentinels in errors.go.
//
// # Identities
//
// A node has an Ed25519 key and a self-signed certificate (cert.pem,
// key.pem). Its DeviceID is SHA-256 of the certificate's SubjectPublicKeyInfo.
// TLS is 1.3 only, with certificates on both sides; chains are never
// validated, instead each side pins the peer's key to a trusted DeviceID.
//
// # Envelopes
//
// A folder key (32 random bytes) is stored on receivers in an envelope. age
// refuses to mix an scrypt recipient with others in one file (else holders
// of the other recipients could forge a file that "authenticates" with the
// password), so an envelope is a small versioned container of age files:
//
//	"lockstep-envelope/v1\n" || 'p' || len16 || age(scrypt: password)
//	                        [ || 'r' || len16 || age(X25519: recovery...) ]
//
// Each age file's payload is exactly the folder key. The password part is
// authenticated by the password; the recovery part only by the secrecy of
// the recovery recipients. Changing the password rewraps the key and
// re-encrypts nothing.
//
// # Chunks and records
//
// From the folder key, HKDF-SHA256 derives independent subkeys (chunk-id,
// chunk, name, record) and the folder's secret chunker polynomial. A chunk's
// ID is keyed BLAKE3 of its plaintext's BLAKE3 hash; its body is
//
//	0x01 || XChaCha20-Poly1305(chunk key, nonce(ID), flags || uvarint(len) || payload || zero padding, aad = ID)
//
// with the payload optionally zstd-compressed and the inner record padded to
// its Padmé length, so receivers never see exact chunk lengths. Sealing is
// deterministic (the nonce derives from the ID), so two devices upload the
// same bytes for the same chunk. A record is
//
//	0x01 || random 24-byte nonce || XChaCha20-Poly1305(record key, nonce, 0x00 || uvarint(len) || payload || zero padding, aad = header)
//
// where the header (folder, file key, origin device, counter) stays readable
// and is bound as associated data.
//
// Invariants:
//   - A flipped bit anywhere in a sealed chunk or record is rejected:
//     ErrFormat for the format byte, ErrAuth anywhere else. Truncation and
//     extension are ErrAuth too (or ErrTooLarge beyond the size limits).
//   - OpenChunk returns only plaintext that hashes to the chunk's ID
//     (ErrChunkID otherwise) and never inflates beyond MaxChunkSize.
//   - The format is pinned by testdata/vectors.json: a change that breaks
//     those vectors is a format change and needs a new format byte, with the
//     old format kept readable.
package crypt
