package crypt

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"strings"
)

// DeviceID identifies a node: the SHA-256 of its certificate's
// SubjectPublicKeyInfo (DER). The zero value is "no device".
type DeviceID [32]byte

// ShortID is the first 8 bytes of a DeviceID read big endian. Version vectors
// use it as the device's key; collisions are improbable among one person's
// devices, never impossible, so it is not an identity.
type ShortID uint64

const (
	// deviceIDGroups is the number of Luhn-checked blocks in a device ID.
	deviceIDGroups = 4
	// deviceIDBlock is the number of base32 characters per checked block.
	deviceIDBlock = 13
	// deviceIDBase32Len is the length of the unpadded base32 form of 32 bytes.
	deviceIDBase32Len = deviceIDGroups * deviceIDBlock // 52
	// deviceIDCheckedLen is the base32 form with one check character per block.
	deviceIDCheckedLen = deviceIDBase32Len + deviceIDGroups // 56
	// deviceIDShownGroup is the length of each dash-separated group shown.
	deviceIDShownGroup = 7
	// luhnAlphabet is the RFC 4648 standard base32 alphabet.
	luhnAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
)

var deviceIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// DeviceIDFromSPKI returns the device ID of a public key given as
// SubjectPublicKeyInfo DER.
func DeviceIDFromSPKI(spkiDER []byte) DeviceID {
	return DeviceID(sha256.Sum256(spkiDER))
}

// DeviceIDFromCert returns the device ID of a certificate's public key.
func DeviceIDFromCert(c *x509.Certificate) DeviceID {
	return DeviceIDFromSPKI(c.RawSubjectPublicKeyInfo)
}

// String returns the canonical text form: the unpadded upper-case base32 of
// the 32 bytes (52 characters), with a Luhn mod-32 check character appended
// to each block of 13 (56 characters), shown as 8 groups of 7 joined by "-".
func (d DeviceID) String() string {
	b32 := deviceIDEncoding.EncodeToString(d[:])
	checked := make([]byte, 0, deviceIDCheckedLen)
	for g := range deviceIDGroups {
		block := b32[g*deviceIDBlock : (g+1)*deviceIDBlock]
		checked = append(checked, block...)
		checked = append(checked, luhn32(block))
	}
	var sb strings.Builder
	sb.Grow(deviceIDCheckedLen + deviceIDCheckedLen/deviceIDShownGroup - 1)
	for i := 0; i < len(checked); i += deviceIDShownGroup {
		if i > 0 {
			sb.WriteByte('-')
		}
		sb.Write(checked[i : i+deviceIDShownGroup])
	}
	return sb.String()
}

// ParseDeviceID parses a device ID's text form. It accepts lower case and
// ignores spaces, tabs, newlines and dashes anywhere, so "abcdefg hijklmn..."
// and the 56 characters without dashes both parse. It rejects anything but 56
// base32 characters, a wrong check character (naming the block of 14: group
// 1 is the first two groups shown, group 4 the last two), and a
// non-canonical encoding. Every error wraps ErrInvalidDeviceID.
func ParseDeviceID(s string) (DeviceID, error) {
	norm := make([]byte, 0, deviceIDCheckedLen)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		if strings.IndexByte(luhnAlphabet, c) < 0 {
			return DeviceID{}, fmt.Errorf("%w: character %q is not in the alphabet A-Z, 2-7", ErrInvalidDeviceID, rune(s[i]))
		}
		norm = append(norm, c)
	}
	if len(norm) != deviceIDCheckedLen {
		return DeviceID{}, fmt.Errorf("%w: has %d characters, want %d", ErrInvalidDeviceID, len(norm), deviceIDCheckedLen)
	}
	b32 := make([]byte, 0, deviceIDBase32Len)
	for g := range deviceIDGroups {
		blk := norm[g*(deviceIDBlock+1) : (g+1)*(deviceIDBlock+1)]
		if luhn32(string(blk[:deviceIDBlock])) != blk[deviceIDBlock] {
			return DeviceID{}, fmt.Errorf("%w: check character of group %d is wrong (in %s-%s)",
				ErrInvalidDeviceID, g+1, blk[:deviceIDShownGroup], blk[deviceIDShownGroup:])
		}
		b32 = append(b32, blk[:deviceIDBlock]...)
	}
	var d DeviceID
	n, err := deviceIDEncoding.Decode(d[:], b32)
	if err != nil || n != len(d) {
		return DeviceID{}, fmt.Errorf("%w: not base32 of 32 bytes", ErrInvalidDeviceID)
	}
	// 52 characters carry 260 bits; the last 4 must be zero, or two texts
	// would name one device.
	if deviceIDEncoding.EncodeToString(d[:]) != string(b32) {
		return DeviceID{}, fmt.Errorf("%w: not canonical (last character)", ErrInvalidDeviceID)
	}
	return d, nil
}

// IsZero reports whether d is the zero device ID.
func (d DeviceID) IsZero() bool { return d == DeviceID{} }

// Short returns the first 8 bytes of d, big endian.
func (d DeviceID) Short() ShortID {
	return ShortID(binary.BigEndian.Uint64(d[:8]))
}

// MarshalText returns the canonical text form (see String).
func (d DeviceID) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses text as ParseDeviceID does; on error d is unchanged.
func (d *DeviceID) UnmarshalText(text []byte) error {
	id, err := ParseDeviceID(string(text))
	if err != nil {
		return err
	}
	*d = id
	return nil
}

// String returns the first 7 characters of the device ID's text form, which
// the 8 bytes of a ShortID fully determine (35 bits).
func (s ShortID) String() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(s))
	return deviceIDEncoding.EncodeToString(b[:])[:deviceIDShownGroup]
}

// luhn32 returns the Luhn mod-32 check character of s, which must consist
// of luhnAlphabet characters. This is the variant Syncthing uses: factors
// alternate 1, 2, 1, ... from the left, each product's base-32 digits are
// summed, and the check value brings the sum to a multiple of 32.
func luhn32(s string) byte {
	const n = len(luhnAlphabet)
	sum, factor := 0, 1
	for i := 0; i < len(s); i++ {
		v := factor * strings.IndexByte(luhnAlphabet, s[i])
		sum += v/n + v%n
		factor = 3 - factor
	}
	return luhnAlphabet[(n-sum%n)%n]
}
