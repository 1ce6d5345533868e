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
