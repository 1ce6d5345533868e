package protocol

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

const (
	// DeviceIDSize is the length of a device ID: a SHA-256 digest.
	DeviceIDSize = 32

	// HashSize is the length of a chunk hash: BLAKE3-256.
	HashSize = 32

	// MaxReceiverClaims bounds the claims of one ReceiverClaims message.
	MaxReceiverClaims = 4096

	// MaxEnvelopeSize bounds a folder key envelope in an
	// REQUEST_KIND_ENVELOPE_PUT request.
	MaxEnvelopeSize = 64 << 10
)

var (
	errNegative = errors.New("negative value")
	errHashSize = errors.New("hash is not 32 bytes")
)

// validate enforces the rules lockstep.proto marks "checked on receipt".
// Its errors are wrapped in ErrMalformed by the caller.
func validate(msg proto.Message) error {
	switch m := msg.(type) {
	case *ClusterConfig:
		for _, f := range m.GetFolders() {
			for _, d := range f.GetDevices() {
				if len(d.GetDeviceId()) != DeviceIDSize {
					return fmt.Errorf("folder %q: device ID of %d bytes", f.GetId(), len(d.GetDeviceId()))
				}
			}
		}
	case *Index:
		return validateFiles(m.GetFiles())
	case *IndexUpdate:
		return validateFiles(m.GetFiles())
	case *Request:
		if m.GetOffset() < 0 {
			return fmt.Errorf("request offset: %w", errNegative)
		}
		if m.GetSize() > MaxRequestSize {
			return fmt.Errorf("request size %d exceeds %d", m.GetSize(), MaxRequestSize)
		}
		if n := len(m.GetHash()); n != 0 && n != HashSize {
			return fmt.Errorf("request: %w", errHashSize)
		}
		if (m.GetKind() == RequestKind_REQUEST_KIND_SEALED_CHUNK || m.GetKind() == RequestKind_REQUEST_KIND_CHUNK_REPAIR) && len(m.GetChunkId()) != HashSize {
			return fmt.Errorf("request: chunk ID of %d bytes", len(m.GetChunkId()))
		}
		if n := len(m.GetChunkId()); m.GetKind() == RequestKind_REQUEST_KIND_CHUNK_LIST && n != 0 && n != HashSize {
			return fmt.Errorf("request: chunk list after an ID of %d bytes", n)
		}
		if (m.GetKind() == RequestKind_REQUEST_KIND_CHUNK_REPAIR) != (len(m.GetBody()) > 0) {
			return fmt.Errorf("request: a body of %d bytes with kind %v", len(m.GetBody()), m.GetKind())
		}
		if len(m.GetEnvelope()) > MaxEnvelopeSize {
			return fmt.Errorf("request: envelope of %d bytes exceeds %d", len(m.GetEnvelope()), MaxEnvelopeSize)
		}
		if n := len(m.GetPrevious()); n != 0 && n != HashSize {
			return fmt.Errorf("request: previous envelope hash of %d bytes", n)
		}
		if n := len(m.GetFileKey()); n != 0 && n != HashSize {
			return fmt.Errorf("request: file key of %d bytes", n)
		}
	case *SealedIndex:
		if err := validateSealed(m.GetRecords()); err != nil {
			return err
		}
		for i, c := range m.GetInline() {
			if len(c.GetId()) != HashSize {
				return fmt.Errorf("inline chunk %d: ID of %d bytes", i, len(c.GetId()))
			}
			if len(c.GetBody()) == 0 {
				return fmt.Errorf("inline chunk %d: empty", i)
			}
		}
	case *SealedAck:
		if m.GetSequence() < 0 {
			return fmt.Errorf("sealed ack sequence: %w", errNegative)
		}
	case *ReceiverClaims:
		return validateClaims(m.GetClaims())
	}
	return nil
}

// validateClaims checks the claims of a ReceiverClaims.
func validateClaims(claims []*ReceiverClaim) error {
	if len(claims) > MaxReceiverClaims {
		return fmt.Errorf("%d receiver claims exceed %d", len(claims), MaxReceiverClaims)
	}
	for i, c := range claims {
		switch {
		case len(c.GetReceiver()) != DeviceIDSize:
			return fmt.Errorf("receiver claim %d: receiver of %d bytes", i, len(c.GetReceiver()))
		case len(c.GetOrigin()) != DeviceIDSize:
			return fmt.Errorf("receiver claim %d: origin of %d bytes", i, len(c.GetOrigin()))
		case c.GetLogId() == 0:
			return fmt.Errorf("receiver claim %d: log ID 0", i)
		case c.GetCounter() == 0:
			return fmt.Errorf("receiver claim %d: counter 0", i)
		case c.GetSequence() < 1:
			return fmt.Errorf("receiver claim %d: sequence %d below 1", i, c.GetSequence())
		}
	}
	return nil
}

// DecodeAnswer decodes the data of a Response to a request of kind
// REQUEST_KIND_LOG_READ (into a LogPage), REQUEST_KIND_CHUNK_LIST (a
// ChunkList) or REQUEST_KIND_VERSIONS (a SealedIndex), and checks it as a
// frame's message is checked on receipt; errors wrap ErrMalformed.
func DecodeAnswer(data []byte, m proto.Message) error {
	if err := proto.Unmarshal(data, m); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var err error
	switch m := m.(type) {
	case *LogPage:
		err = validateSealed(m.GetRecords())
		if err == nil && m.GetLastSequence() < 0 {
			err = fmt.Errorf("log page last sequence: %w", errNegative)
		}
	case *ChunkList:
		for i, c := range m.GetChunks() {
			if len(c.GetId()) != HashSize {
				err = fmt.Errorf("chunk list entry %d: ID of %d bytes", i, len(c.GetId()))
				break
			}
			if c.GetSize() < 0 {
				err = fmt.Errorf("chunk list entry %d size: %w", i, errNegative)
				break
			}
		}
	default:
		err = validate(m)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// validateSealed checks the records of a SealedIndex.
func validateSealed(recs []*SealedRecord) error {
	for i, r := range recs {
		if r.GetSequence() < 0 {
			return fmt.Errorf("sealed record %d sequence: %w", i, errNegative)
		}
		if len(r.GetOrigin()) != DeviceIDSize {
			return fmt.Errorf("sealed record %d: origin of %d bytes", i, len(r.GetOrigin()))
		}
		if len(r.GetFileKey()) != HashSize {
			return fmt.Errorf("sealed record %d: file key of %d bytes", i, len(r.GetFileKey()))
		}
		for j, c := range r.GetChunks() {
			if len(c) != HashSize {
				return fmt.Errorf("sealed record %d chunk %d: ID of %d bytes", i, j, len(c))
			}
		}
	}
	return nil
}

// validateFiles checks the FileInfos of an Index or IndexUpdate.
func validateFiles(files []*FileInfo) error {
	for i, f := range files {
		if f.GetSize() < 0 {
			return fmt.Errorf("file %d size: %w", i, errNegative)
		}
		for j, b := range f.GetBlocks() {
			if b.GetOffset() < 0 {
				return fmt.Errorf("file %d block %d offset: %w", i, j, errNegative)
			}
			if len(b.GetHash()) != HashSize {
				return fmt.Errorf("file %d block %d: %w", i, j, errHashSize)
			}
		}
	}
	return nil
}
